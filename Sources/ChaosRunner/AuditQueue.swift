import ChaosCore
import Foundation

/// The bounded hand-over between the relay threads and the audit's own thread: producers append events (in the
/// order they take the lock, their times kept monotonic), the audit takes them all at once. When the events waiting
/// hold more than `capacity` bytes, a producer waits for the audit (real backpressure: the relay is held, memory is
/// not spent), and the time it waited is counted, so that a report can say how long the audit held the pair back.
final class AuditQueue: @unchecked Sendable {
    // @unchecked: every field below is read and written only with `condition` locked.
    private let condition = NSCondition()
    private var events: [TrafficEvent] = []
    private var bytes = 0
    private var closed = false
    private var lastTime: Int64 = 0
    /// Events appended, and events the audit has finished with (for ``waitUntilTaken()``).
    private var appended: UInt64 = 0
    private var processed: UInt64 = 0
    private var consumerWaiting = false
    private var backpressureNanoseconds: Int64 = 0
    private var peak = 0

    /// The most bytes of events waiting before producers wait.
    let capacity: Int

    init(capacity: Int) { self.capacity = max(capacity, 1) }

    /// Appends `event`, waiting while the queue is full.
    func append(_ event: TrafficEvent) {
        let cost = event.queuedBytes
        condition.lock()
        if bytes + cost > capacity, bytes > 0, !closed {
            let start = DispatchTime.now().uptimeNanoseconds
            while bytes + cost > capacity, bytes > 0, !closed { condition.wait() }
            backpressureNanoseconds += Int64(DispatchTime.now().uptimeNanoseconds - start)
        }
        var event = event
        // Events from several threads race to the lock by microseconds: keep time monotonic.
        if event.time < lastTime { event.time = lastTime } else { lastTime = event.time }
        events.append(event)
        bytes += cost
        peak = max(peak, bytes)
        appended += 1
        if consumerWaiting { condition.broadcast() }
        condition.unlock()
    }

    /// Every event waiting (waiting for one when there is none); nil once closed and empty.
    func take() -> [TrafficEvent]? {
        condition.lock()
        defer { condition.unlock() }
        while events.isEmpty, !closed {
            consumerWaiting = true
            condition.wait()
            consumerWaiting = false
        }
        guard !events.isEmpty else { return nil }
        let batch = events
        events.removeAll(keepingCapacity: true)
        bytes = 0
        condition.broadcast()  // producers waiting for room
        return batch
    }

    /// The audit finished with `count` events taken.
    func done(_ count: Int) {
        condition.lock()
        processed += UInt64(count)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until the audit has finished with every event appended before this call.
    func waitUntilTaken() {
        condition.lock()
        let target = appended
        while processed < target, !closed { condition.wait() }
        condition.unlock()
    }

    /// No more events: the audit thread ends once it has taken the last.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// How long producers waited for room, in seconds, and the most bytes that ever waited.
    var backpressure: (seconds: Double, peakBytes: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (Double(backpressureNanoseconds) / 1e9, peak)
    }
}
