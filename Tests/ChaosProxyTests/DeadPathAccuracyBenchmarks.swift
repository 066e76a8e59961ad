import ChaosCore
import Foundation
import Glibc
import Testing

@testable import ChaosProxy

/// A partition's and a loss fault's timing on real sockets, for `Benchmarks/fault-accuracy.sh`: records written at a
/// steady pace through the proxy, their arrival times read at the server.
extension FaultAccuracyBenchmarks {
    /// Prints `accuracy: NAME: measured M UNIT (WHAT)`, for a figure with a bound rather than a target.
    static func note(_ name: String, measured: Double, unit: String, _ what: String) {
        print("accuracy: \(name): measured \(String(format: "%.2f", measured)) \(unit) (\(what))")
    }

    /// The size of one paced record: a 4-byte index and padding.
    static let recordBytes = 64

    /// Writes `count` records from `client`, one every `spacing` milliseconds from `start` (uptime nanoseconds), and
    /// reads them at `server`: when each record was written and when it arrived, in milliseconds after `start` (fewer
    /// when the writes or the reads stopped).
    static func paced(
        client: TestSocket,
        server: TestSocket,
        count: Int,
        spacing: Double,
        start: UInt64
    ) -> (sent: [Double], arrived: [Double]) {
        let writer = Background { () -> [Double] in
            var sent: [Double] = []
            for index in 0..<count {
                let due = start + UInt64(Double(index) * spacing * 1e6)
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { usleep(UInt32((due - now) / 1_000)) }
                var record = [UInt8](repeating: 0, count: recordBytes)
                withUnsafeBytes(of: UInt32(index).littleEndian) { record.replaceSubrange(0..<4, with: $0) }
                sent.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                guard (try? client.sendAll(record)) != nil else { break }
            }
            return sent
        }
        var arrived: [Double] = []
        server.setTimeout(15)
        while arrived.count < count {
            guard server.receive(exactly: recordBytes).count == recordBytes else { break }
            arrived.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        return (writer.join(timeout: 15) ?? [], arrived)
    }

    /// What the peer of `socket` acknowledged (`tcpi_bytes_acked`), or -1.
    static func bytesAcknowledged(_ socket: TestSocket) -> Int64 {
        TCPCounters(socket: socket.fd).map { Int64($0.acknowledged) } ?? -1
    }

    @Test(
        "a 2 s partition: the receiver's gap is 2 s (±100 ms); on the kernel path the sender sees no acknowledgement during it",
        .enabled(if: FaultAccuracyBenchmarks.enabled)
    )
    func partitionTiming() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            let key = ShapingKey(occurrence: 1)
            let start = DispatchTime.now().uptimeNanoseconds + 100_000_000
            let milliseconds: @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 }
            // The fault's own thread: on 1 s after the start, off 2 s later, each when the proxy says it is done.
            let fault = Background { () -> (on: Double, lift: Double, acked: Int64) in
                usleep(1_100_000)
                let on = milliseconds()
                _ = try? blockingAwait { await harness.proxy.addShaping(.partition(direction: .both), key: key, to: nil) }
                let ackedAtOn = Self.bytesAcknowledged(client)
                usleep(UInt32(max(0, 3_000 - milliseconds()) * 1_000))
                let acked = Self.bytesAcknowledged(client) - ackedAtOn
                let lift = milliseconds()
                _ = try? blockingAwait { await harness.proxy.removeShaping(key: key) }
                return (on, lift, acked)
            }
            let (sent, arrivals) = Self.paced(client: client, server: server, count: 600, spacing: 10, start: start)
            let (on, lift, acked) = try #require(fault.join(timeout: 30))
            #expect(arrivals.count == 600 && sent.count == 600, "every record arrived, once the path came back")
            let gaps = zip(arrivals, arrivals.dropFirst()).map { $1 - $0 }
            let gap = gaps.max() ?? 0
            let firstAfter = arrivals.first { $0 >= lift } ?? .infinity
            // Back on schedule: the first record after the lift that arrives within 50 ms of when it was written.
            let onSchedule = zip(sent, arrivals).first { $0.1 >= lift && $0.1 - $0.0 < 50 }.map(\.1)
            let kernel = KernelDeadPath.shared.availability == .kernel
            FaultAccuracyBenchmarks.report("partition 2 s, the receiver's longest gap", measured: gap, target: lift - on, unit: "ms")
            Self.note("partition 2 s, first byte after the lift", measured: firstAfter - lift, unit: "ms", "what the proxy held")
            Self.note(
                "partition 2 s, the stream back on schedule",
                measured: (onSchedule ?? .infinity) - lift,
                unit: "ms after the lift",
                "the sender's retransmission backoff"
            )
            Self.note(
                "partition 2 s, acknowledged to the sender during it",
                measured: Double(acked),
                unit: "B",
                kernel ? "dropped in the kernel: at most one window" : "held in the proxy: its kernel acknowledges"
            )
            #expect(abs(gap - (lift - on)) <= 100, "gap \(gap) ms, partition \(lift - on) ms")
            if kernel { #expect((0...65_536).contains(acked), "acknowledged during the partition: \(acked) B") }
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test(
        "a 5 % loss upstream: about 5 % of the pieces wait a retransmission timeout (200 ms), each stalling the records behind it",
        .enabled(if: FaultAccuracyBenchmarks.enabled)
    )
    func lossTiming() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            let queue = KernelDeadPath.shared.availability == .kernel ? KernelDeadPath.shared.loss : nil
            let before = queue?.total ?? KernelLoss.Counts()
            try blockingAwait {
                await harness.proxy.addShaping(.loss(rate: 0.05, burst: 1, direction: .upstream), key: ShapingKey(occurrence: 1), to: nil)
            }
            let count = 1_000
            let start = DispatchTime.now().uptimeNanoseconds + 100_000_000
            let (sent, arrivals) = Self.paced(client: client, server: server, count: count, spacing: 10, start: start)
            #expect(arrivals.count == count && sent.count == count)
            if let queue {
                Self.kernelLoss(queue.total, since: before, sent: sent, arrived: arrivals, count: count)
                client.close()
                server.close()
                return
            }
            // A lost piece arrives a retransmission timeout (200 ms, more if lost again) after it was written; those
            // behind it wait for it (order is kept) and arrive with it, each 10 ms less late than the one before. A
            // loss is a record at least 190 ms late that is not one of those. Loopback adds well under a millisecond.
            let delays = zip(sent, arrivals).map { $1 - $0 }
            var stalls: [Double] = []
            for (index, delay) in delays.enumerated() where delay >= 190 && (index == 0 || delay > delays[index - 1] - 5) {
                stalls.append(delay)
            }
            let losses = stalls.count
            stalls.sort()
            // What the seeded model lost: one event per lost piece (its delay doubles when it is lost again).
            let injected = harness.events.all.filter { event in
                if case .path(.retransmission(.upstream, _)) = event.kind { true } else { false }
            }.count
            Self.note("loss 5 %, pieces the model lost", measured: Double(injected), unit: "pieces", "of \(count): target \(count / 20)")
            FaultAccuracyBenchmarks.report(
                "loss 5 %, lost pieces the receiver saw stall",
                measured: Double(losses),
                target: Double(injected),
                unit: "pieces"
            )
            Self.note(
                "loss 5 %, median stall of a loss",
                measured: stalls.isEmpty ? 0 : stalls[stalls.count / 2],
                unit: "ms",
                "a retransmission timeout: 200 ms, doubling for a piece lost again"
            )
            // 50 expected of the model; a binomial's spread is about 7. Every loss it draws stalls the receiver, but one
            // drawn while a longer stall holds the records (a piece lost twice: 600 ms) is hidden in it.
            #expect((25...75).contains(injected), "the model lost \(injected) of \(count) pieces")
            #expect(losses <= injected && losses * 10 >= injected * 8, "the receiver saw \(losses) stalls, the model lost \(injected)")
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    /// The loss bench on the kernel path: the segments the queue dropped (`total` less `before`), and what the receiver
    /// saw of them: the client's TCP sent each again, and the records behind one waited for it (a record later than
    /// 5 ms on loopback is a stall; on a busy machine some are the scheduler's, so the count is a bound, not a match).
    static func kernelLoss(_ total: KernelLoss.Counts, since before: KernelLoss.Counts, sent: [Double], arrived: [Double], count: Int) {
        let (dropped, drawn) = (total.dropped - before.dropped, total.segments - before.segments)
        note(
            "loss 5 % in the kernel, segments the queue dropped",
            measured: Double(dropped),
            unit: "segments",
            "of \(drawn) drawn: target \(drawn / 20)"
        )
        let delays = zip(sent, arrived).map { $1 - $0 }
        var stalls: [Double] = []
        for (index, delay) in delays.enumerated() where delay >= 5 && (index == 0 || delay > delays[index - 1] - 5) {
            stalls.append(delay)
        }
        stalls.sort()
        note("loss 5 % in the kernel, stalls the receiver saw", measured: Double(stalls.count), unit: "stalls", "of \(dropped) dropped")
        note(
            "loss 5 % in the kernel, median stall",
            measured: stalls.isEmpty ? 0 : stalls[stalls.count / 2],
            unit: "ms",
            "the client's TCP finding the loss: a round trip's reordering window, or a timeout for a tail loss"
        )
        // About 50 of 1,000 records' segments (each record one segment at this pace), plus their retransmissions'.
        #expect((25...80).contains(dropped), "the queue dropped \(dropped) of \(drawn) segments")
        #expect(drawn >= Int64(count), "every record's segment was drawn for: \(drawn)")
        #expect(stalls.count * 2 >= Int(dropped), "most drops stall the receiver: \(stalls.count) stalls, \(dropped) dropped")
    }
}
