import ChaosCore
import Foundation
import Synchronization
import Testing

@testable import ChaosProxy

/// A relay that records traffic reads each burst into the read event's own array: a large read is handed over (and,
/// written whole, handed over again as the written event) with no copy, a small one in an array of its size, so the
/// audit's bounded queue, which counts each event's buffer capacity, holds about what it says it holds.
@Suite("Recorded reads: large reads handed over in their own array, small ones in an array of their size")
struct RecordedReadBufferTests {
    @Test(
        "a 4 MiB burst and small messages: the bytes arrive whole, large reads are written from their own buffer, no event holds more than 4x what it carries"
    )
    func readBuffers() async throws {
        let harness = try await ProxyHarness(epollRelay: true)
        let (client, server) = try await offPool { try harness.connectPair() }
        let burst = pattern(count: 4 << 20, seed: 11)
        var sent = burst
        for index in 0..<50 { sent += Array("small message \(index)\n".utf8) }
        let recorder = harness.events
        let received = try await offPool { [sent] in
            let done = DispatchSemaphore(value: 0)
            let got = Mutex<[UInt8]>([])
            let reader = Thread {
                got.withLock { $0 = server.receive(exactly: sent.count) }
                done.signal()
            }
            reader.start()
            try client.sendAll(burst)
            var written = burst.count
            for index in 0..<50 {
                // Each small message once the proxy has read everything before it: it comes in a read of its own,
                // however slowly the relay runs (a fixed pause let a starved relay read many at once).
                let deadline = Date().addingTimeInterval(10)
                while Self.readCount(recorder.all) < written, Date() < deadline { usleep(1000) }
                let message = Array("small message \(index)\n".utf8)
                try client.sendAll(message)
                written += message.count
            }
            _ = done.wait(timeout: .now() + 20)
            return got.withLock { $0 }
        }
        let arrived = sameBytes(received, sent)
        #expect(arrived, "the server received what the client sent (\(received.count) of \(sent.count) bytes)")
        try await waitUntil("every byte read by the proxy recorded") { Self.readBytes(harness.events.all).count == sent.count }
        let events = harness.events.all
        let recorded = sameBytes(Self.readBytes(events), sent)
        #expect(recorded, "the read events carry what the client sent")
        var largeReads = 0
        var sharedWrites = 0
        var smallReads = 0
        for (index, event) in events.enumerated() {
            guard case .read(.client, let bytes) = event.kind else { continue }
            #expect(bytes.capacity <= max(4 * bytes.count, 64), "a read of \(bytes.count) bytes holds a buffer of \(bytes.capacity)")
            #expect(event.queuedBytes >= bytes.capacity, "the queue counts the buffer it holds")
            // A quarter of the 64 KiB read array and more (its allocation rounds up: s78h5's read of exactly 16,384 bytes
            // held 65,544, past four times what it carried, before the relay compared with the array's own capacity).
            if bytes.count > 16384 + 64 {
                largeReads += 1
                #expect(bytes.capacity >= 65536, "a large read is handed over in the 64 KiB array it was read into (no copy)")
            } else {
                smallReads += 1
            }
            if let next = events[(index + 1)...].first(where: { if case .written(.server, _) = $0.kind { true } else { false } }),
                case .written(.server, let written) = next.kind, written.count == bytes.count,
                written.withUnsafeBufferPointer({ $0.baseAddress }) == bytes.withUnsafeBufferPointer({ $0.baseAddress })
            {
                sharedWrites += 1
            }
        }
        #expect(largeReads > 0, "the burst came in large reads")
        #expect(smallReads >= 10, "the small messages came in small reads")
        #expect(sharedWrites > 0, "reads written whole hand their own buffer over as the written bytes")
        client.close()
        server.close()
        await harness.shutdown()
    }

    /// How many bytes the proxy has read from the client.
    static func readCount(_ events: [TrafficEvent]) -> Int {
        events.reduce(0) { total, event in if case .read(.client, let bytes) = event.kind { total + bytes.count } else { total } }
    }

    /// Everything the proxy read from the client, in order.
    static func readBytes(_ events: [TrafficEvent]) -> [UInt8] {
        var all: [UInt8] = []
        for event in events { if case .read(.client, let bytes) = event.kind { all += bytes } }
        return all
    }
}
