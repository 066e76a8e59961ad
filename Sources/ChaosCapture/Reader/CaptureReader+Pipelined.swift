package import ChaosCore
import Foundation

extension CaptureReader {
    /// Reads `paths` as ``read(paths:options:_:)`` does, but on a thread of its own: libpcap, TCP reassembly and TLS
    /// decryption run there while `handler` (the audit) runs on the calling thread, the two a core each. Events go over
    /// in batches through a bounded hand-over (at most ``PipelinedEvents/capacity`` bytes of them wait), so a slow
    /// handler holds the reader back and memory stays bounded. `handler` sees the same events in the same order.
    /// - Throws: what ``read(paths:options:_:)`` throws (from the reader, after the events it read before the error), or
    ///   what `handler` throws (the reader is then stopped).
    package static func readPipelined(
        paths: [String],
        options: CaptureReadOptions = CaptureReadOptions(),
        _ handler: (TrafficEvent) throws -> Void
    ) throws -> CaptureStatistics {
        let channel = PipelinedEvents()
        let reader = Thread {
            do {
                // Each batch is handed over as the reader made it (no event copied, none retained again).
                let statistics = try readBatches(paths: paths, options: options) { events, bytes in
                    guard channel.put(events, bytes: bytes) else { throw PipelinedEvents.Stopped() }
                }
                channel.finish(.success(statistics))
            } catch {
                channel.finish(.failure(error))
            }
        }
        reader.stackSize = 8 << 20
        reader.start()
        do {
            while let batch = channel.take() {
                // Each event lent to the handler in place (iterating the array would copy each one).
                try batch.withUnsafeBufferPointer { events in
                    for index in events.indices { try handler(events[index]) }
                }
            }
        } catch {
            channel.stop()
            _ = channel.waitForEnd()
            throw error
        }
        return try channel.waitForEnd().get()
    }
}

/// The bounded hand-over of ``CaptureReader/readPipelined(paths:options:_:)``: batches of events from the reader's
/// thread to the handler's, the reader waiting while more than ``capacity`` bytes of them wait.
final class PipelinedEvents: @unchecked Sendable {
    // @unchecked: every field below is read and written only with `condition` locked.
    static let capacity = 32 << 20
    static let batchEvents = 512
    static let batchBytes = 1 << 20
    struct Stopped: Error {}

    private let condition = NSCondition()
    private var batches: [([TrafficEvent], Int)] = []
    private var bytes = 0
    private var stopped = false
    private var end: Result<CaptureStatistics, any Error>?

    /// Hands `batch` over, waiting for room; false once the handler stopped (the reader should stop too).
    func put(_ batch: [TrafficEvent], bytes cost: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while bytes > 0, bytes + cost > Self.capacity, !stopped { condition.wait() }
        guard !stopped else { return false }
        batches.append((batch, cost))
        bytes += cost
        condition.broadcast()
        return true
    }

    /// The oldest batch, waiting for one; nil once the reader ended and every batch was taken.
    func take() -> [TrafficEvent]? {
        condition.lock()
        defer { condition.unlock() }
        while batches.isEmpty, end == nil { condition.wait() }
        guard !batches.isEmpty else { return nil }
        let (batch, cost) = batches.removeFirst()
        bytes -= cost
        condition.broadcast()
        return batch
    }

    /// The reader ended, with its statistics or its error.
    func finish(_ result: Result<CaptureStatistics, any Error>) {
        condition.lock()
        end = result
        condition.broadcast()
        condition.unlock()
    }

    /// The handler failed: the reader's next hand-over tells it to stop.
    func stop() {
        condition.lock()
        stopped = true
        batches.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for the reader's end.
    func waitForEnd() -> Result<CaptureStatistics, any Error> {
        condition.lock()
        defer { condition.unlock() }
        while end == nil { condition.wait() }
        return end!
    }
}
