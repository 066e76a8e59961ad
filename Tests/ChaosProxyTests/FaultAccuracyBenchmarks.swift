import ChaosCore
import Foundation
import Testing

@testable import ChaosProxy

/// How close latency and bandwidth come to their targets on real sockets, measured against the direct path
/// in the same run. A benchmark, not a test: the time it measures is the machine's as much as chaos's, so
/// `make test` skips it; `Benchmarks/fault-accuracy.sh` (part of `make bench`) runs it on a quiet machine
/// and prints the ratios. The same behaviour is tested exactly in virtual time by ShaperTests and
/// ShapingHandlerTests.
@Suite("Fault accuracy on real sockets (benchmark)", .serialized, .timeLimit(.minutes(5)))
struct FaultAccuracyBenchmarks {
    /// Set by `Benchmarks/fault-accuracy.sh`.
    static let enabled = ProcessInfo.processInfo.environment["CHAOS_ACCURACY_BENCH"] == "1"

    /// Prints `accuracy: NAME measured M UNIT, target T UNIT, ratio R` for the script to collect.
    static func report(_ name: String, measured: Double, target: Double, unit: String) {
        print(
            "accuracy: \(name): measured \(String(format: "%.2f", measured)) \(unit), target \(Int(target)) \(unit), "
                + "ratio \(String(format: "%.3f", measured / target))"
        )
    }

    /// Median round trip of `count` 64-byte ping-pongs through the pair.
    func medianRoundTrip(client: TestSocket, server: TestSocket, count: Int) throws -> Double {
        let echo = Background { () -> Bool in
            for _ in 0..<count {
                let ping = server.receive(exactly: 64)
                guard ping.count == 64, (try? server.sendAll(ping)) != nil else { return false }
            }
            return true
        }
        var samples: [Double] = []
        let ping = [UInt8](repeating: 42, count: 64)
        for _ in 0..<count {
            let start = DispatchTime.now().uptimeNanoseconds
            try client.sendAll(ping)
            guard client.receive(exactly: 64).count == 64 else { break }
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        #expect(echo.join() == true)
        samples.sort()
        return samples.isEmpty ? .infinity : samples[samples.count / 2]
    }

    @Test("a 100 ms downstream latency adds 100 ms (±2 ms, median) to a round trip", .enabled(if: FaultAccuracyBenchmarks.enabled))
    func latencyAddsDelay() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            let direct = try medianRoundTrip(client: client, server: server, count: 20)
            try blockingAwait {
                await harness.proxy.addShaping(
                    .latency(add: .milliseconds(100), jitter: .zero, direction: .downstream),
                    key: ShapingKey(occurrence: 1),
                    to: nil
                )
            }
            let delayed = try medianRoundTrip(client: client, server: server, count: 20)
            FaultAccuracyBenchmarks.report("latency 100 ms added", measured: delayed - direct, target: 100, unit: "ms")
            #expect(abs(delayed - direct - 100) <= 2, "added \(delayed - direct) ms")
            try blockingAwait { await harness.proxy.removeShaping(key: ShapingKey(occurrence: 1)) }
            let after = try medianRoundTrip(client: client, server: server, count: 10)
            #expect(after < direct + 20)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("a 1 MB/s bandwidth cap delivers within 5 % of 1 MB/s over 5 s", .enabled(if: FaultAccuracyBenchmarks.enabled))
    func bandwidthCap() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait {
                await harness.proxy.addShaping(
                    .bandwidth(rate: ByteRate(bytesPerSecond: 1_000_000), direction: .upstream),
                    key: ShapingKey(occurrence: 1),
                    to: nil
                )
            }
            let writer = Background { () -> Void in
                let chunk = [UInt8](repeating: 1, count: 65536)
                while (try? client.sendAll(chunk)) != nil {}
            }
            _ = server.receive(exactly: 100_000)  // let the pipe fill
            let start = DispatchTime.now().uptimeNanoseconds
            var received = 0
            while DispatchTime.now().uptimeNanoseconds - start < 5_000_000_000 {
                if case .bytes(let chunk) = server.receive() { received += chunk.count } else { break }
            }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            let rate = Double(received) / seconds
            FaultAccuracyBenchmarks.report("bandwidth 1 MB/s", measured: rate, target: 1_000_000, unit: "B/s")
            #expect(abs(rate - 1_000_000) / 1_000_000 <= 0.05, "measured \(Int(rate)) B/s")
            client.shutdownBoth()  // stops the writer thread before its descriptor is closed
            _ = writer.join(timeout: 15)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }
}
