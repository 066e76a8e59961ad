import ChaosCore
import Foundation
import Synchronization
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// What each fault does on real sockets. How exactly latency and bandwidth are kept is tested in virtual
/// time (ShaperTests, ShapingHandlerTests) and measured on real sockets by `Benchmarks/fault-accuracy.sh`.
@Suite("Faults on real sockets", .serialized, .timeLimit(.minutes(5)))
struct FaultTests {
    @Test("latency with jitter keeps byte order")
    func jitterKeepsOrder() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait {
                await harness.proxy.addShaping(
                    .latency(add: .milliseconds(20), jitter: .milliseconds(15), direction: .both),
                    key: ShapingKey(occurrence: 1),
                    to: nil
                )
            }
            let data = pattern(count: 2_000_000, seed: 9)
            let reader = Background { server.receive(exactly: 2_000_000) }
            for start in stride(from: 0, to: data.count, by: 1000) {
                try client.sendAll(Array(data[start..<min(start + 1000, data.count)]))
            }
            let got = try #require(reader.join())
            expectSameBytes(got, data)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("during a partition both legs stay ESTABLISHED and nothing crosses; afterwards nothing is lost")
    func partitionHoldsThenReleases() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { await harness.proxy.addShaping(.partition(direction: .both), key: ShapingKey(occurrence: 1), to: nil) }
            let message = pattern(count: 100_000, seed: 3)
            try client.sendAll(message)
            try server.sendAll(Array("downstream during partition".utf8))
            server.setTimeout(0.5)
            client.setTimeout(0.5)
            #expect(server.receive() == .error(EAGAIN), "a byte crossed the partition upstream")
            #expect(client.receive() == .error(EAGAIN), "a byte crossed the partition downstream")
            let legs = try establishedLegs([(client.localPort, harness.port), (server.peerPort, harness.upstream.port)])
            #expect(legs[0] == 2, "client leg not ESTABLISHED both ends: \(legs)")
            #expect(legs[1] == 2, "server leg not ESTABLISHED both ends: \(legs)")
            try blockingAwait { await harness.proxy.removeShaping(key: ShapingKey(occurrence: 1)) }
            server.setTimeout(10)
            client.setTimeout(10)
            expectSameBytes(server.receive(exactly: message.count), message)
            #expect(String(decoding: client.receive(exactly: 27), as: UTF8.self) == "downstream during partition")
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("refuse gives new clients ECONNREFUSED, and the proxy listens again after")
    func refuseRefuses() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            try blockingAwait { await harness.proxy.beginRefusing() }
            #expect(throws: POSIXError(.ECONNREFUSED)) { _ = try TestSocket.connect(port: harness.port) }
            try blockingAwait { await harness.proxy.endRefusing() }
            let (client, server) = try harness.connectPair()
            try client.sendAll([9])
            #expect(server.receive(exactly: 1) == [9])
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("disconnect mode close sends FIN to both sides (epoll relay, cut in place, or NIO)", arguments: [true, false])
    func disconnectCloseSendsFIN(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { try await harness.waitForConnections(1) }
            try blockingAwait { await harness.proxy.disconnect(nil, mode: .close, linger: .seconds(Int64(1))) }
            #expect(client.receiveUntilEnd().1 == .eof)
            #expect(server.receiveUntilEnd().1 == .eof)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("disconnect mode reset sends RST to both sides (epoll relay, cut in place, or NIO)", arguments: [true, false])
    func disconnectResetSendsRST(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { try await harness.waitForConnections(1) }
            try blockingAwait { await harness.proxy.disconnect(nil, mode: .reset, linger: .zero) }
            #expect(client.receiveUntilEnd().1 == .error(ECONNRESET), "epoll relay: \(epollRelay)")
            #expect(server.receiveUntilEnd().1 == .error(ECONNRESET))
            #expect(harness.proxy.counters.cutByFault == 1)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test(
        "client-only resets the client and leaves the server leg open, silent, for the linger time (epoll relay, cut in place, or NIO)",
        arguments: [true, false]
    )
    func clientOnlyLeavesServerHalfOpen(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { try await harness.waitForConnections(1) }
            #expect(harness.proxy.epollRelayConnections.count == (epollRelay ? 1 : 0))
            let linger = Duration.milliseconds(1500)
            let cutAt = ContinuousClock.now
            let hit = try blockingAwait { await harness.proxy.disconnect(nil, mode: .clientOnly, linger: .milliseconds(1500)) }
            #expect(hit == 1)
            // Cut where it was: an instant fault never moves a connection to NIO.
            // (A cut that came while the upstream connect was under way lands once it answered.)
            try blockingAwait {
                try await waitUntil("the cut connection lingers where it was") {
                    harness.proxy.lingeringOnEpollRelay.count == (epollRelay ? 1 : 0) && harness.proxy.liveConnections.isEmpty
                }
            }
            #expect(client.receiveUntilEnd().1 == .error(ECONNRESET), "epoll relay: \(epollRelay)")
            // The server leg hears nothing until the linger's reset, which cannot come before the linger ran out from
            // the cut (a loaded machine only makes it later: s57bq1's unit lane woke this thread after it).
            server.setTimeout(5)
            let (heard, end) = server.receiveUntilEnd()
            let after = ContinuousClock.now - cutAt
            #expect(heard.isEmpty && end == .error(ECONNRESET), "\(heard.count) bytes, then \(end)")
            #expect(after >= linger - .milliseconds(10), "the server leg heard its end \(after) after the cut, before the linger ended")
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    /// The run's clock, but for the injector's sleeps past the start, which also wait until the test opens the gate:
    /// a fault's phase lasts at least until the test has done what it does in it, however late a loaded machine lets
    /// the test's thread run (s55bq5: in the full unit lane the 300 ms blackout was over before the test sent its bytes
    /// into it, and the send met the handoff's reset).
    final class GatedClock: FaultClock {
        private let clock = RunClock()
        private let gate = Mutex(false)

        func now() -> Int64 { clock.now() }

        func sleep(until time: Int64) async throws {
            try await clock.sleep(until: time)
            guard time > 0 else { return }
            while !gate.withLock({ $0 }) { try await Task.sleep(nanoseconds: 5_000_000) }
        }

        /// Lets the sleeps past the start end (at their time, or at once when it has passed).
        func open() { gate.withLock { $0 = true } }
    }

    @Test("handoff: blackout, then the client side is reset and the server side lingers, new connections get the new link")
    func handoff() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { try await harness.waitForConnections(1) }
            let occurrence = FaultOccurrence(
                index: 0,
                rule: 0,
                at: .zero,
                lasts: .milliseconds(300),
                proxy: nil,
                targets: .all,
                seed: 1,
                effect: .handoff(
                    from: LinkProfile.named("wifi")!,
                    to: LinkProfile.named("3g")!,
                    blackout: .milliseconds(300),
                    linger: .seconds(Int64(5))
                )
            )
            // The blackout ends once the test has sent into it (the gate); the server side lingers 5 s after it, of
            // which the test looks at the first half second.
            let timeline = Timeline(seed: 1, duration: .seconds(Int64(1)), occurrences: [occurrence])
            let clock = GatedClock()
            let injector = FaultInjector(timeline: timeline, proxies: [harness.proxy], clock: clock, sink: harness.events)
            let run = Task { await injector.run() }
            try blockingAwait { try await waitUntil("the handoff began") { !injector.appliedSoFar.isEmpty } }
            try client.sendAll(Array("lost in the blackout".utf8))
            server.setTimeout(0.1)
            #expect(server.receive() == .error(EAGAIN))
            clock.open()
            try blockingAwait { await run.value }
            #expect(client.receiveUntilEnd().1 == .error(ECONNRESET))
            server.setTimeout(0.5)
            #expect(server.receive() == .error(EAGAIN), "the server side was told before the linger ended")
            server.setTimeout(15)
            #expect(server.receiveUntilEnd().1 == .error(ECONNRESET))
            #expect(injector.appliedSoFar.first?.connections == 1)
            // The next connection runs on the 3g profile: 100 ms each way at least.
            let (client2, server2) = try harness.connectPair()
            let start = DispatchTime.now().uptimeNanoseconds
            try client2.sendAll([1])
            #expect(server2.receive(exactly: 1) == [1])
            #expect(DispatchTime.now().uptimeNanoseconds - start >= 80_000_000)
            client.close()
            server.close()
            client2.close()
            server2.close()
        }
        await harness.shutdown()
    }

    @Test("slice cuts writes into pieces of at most the given size, in order")
    func sliceCutsWrites() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait {
                await harness.proxy.addShaping(
                    .slice(maxBytes: 10, delay: DurationRange(.milliseconds(2), .milliseconds(3)), direction: .upstream),
                    key: ShapingKey(occurrence: 1),
                    to: nil
                )
            }
            let message = pattern(count: 200, seed: 5)
            let start = DispatchTime.now().uptimeNanoseconds
            try client.sendAll(message)
            expectSameBytes(server.receive(exactly: 200), message)
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            @Sendable func writes() -> [[UInt8]] {
                harness.events.all.compactMap { if case .written(.server, let bytes) = $0.kind { bytes } else { nil } }
            }
            // The last write's completion is recorded just after it lands.
            try blockingAwait { try await waitUntil("20 pieces written (have \(writes().count))") { writes().count >= 20 } }
            let writes = writes()
            #expect(writes.count == 20, "200 bytes were written in \(writes.count) pieces")
            #expect(writes.allSatisfy { $0.count <= 10 })
            #expect(elapsed >= 19 * 2_000_000, "19 gaps of at least 2 ms took only \(elapsed) ns")
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("an MTU black hole passes a 500-byte exchange and stalls a 20 KB response while it lasts; after it, the response arrives whole")
    func mtuBlackHole() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { await harness.proxy.addShaping(.mtu(size: 1280, direction: .both), key: ShapingKey(occurrence: 1), to: nil) }
            let request = pattern(count: 500, seed: 1)
            let small = pattern(count: 500, seed: 2)
            let big = pattern(count: 20_000, seed: 3)
            try client.sendAll(request)
            expectSameBytes(server.receive(exactly: 500), request)
            try server.sendAll(small)
            expectSameBytes(client.receive(exactly: 500), small)
            try server.sendAll(big)
            client.setTimeout(0.7)
            #expect(client.receive() == .error(EAGAIN), "a byte of the big response crossed the black hole")
            let legs = try establishedLegs([(client.localPort, harness.port), (server.peerPort, harness.upstream.port)])
            #expect(legs == [2, 2], "both legs stay ESTABLISHED: \(legs)")
            try blockingAwait { await harness.proxy.removeShaping(key: ShapingKey(occurrence: 1)) }
            client.setTimeout(10)
            expectSameBytes(client.receive(exactly: big.count), big)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("loss delays what it loses by a retransmission timeout and keeps every byte, in order")
    func lossKeepsBytes() async throws {
        // The emulation's own loss: as root the kernel would drop real segments, and its retransmissions on loopback
        // come sooner (a tail loss probe after a few milliseconds).
        let harness = try await ProxyHarness(deadPathInKernel: false)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait {
                await harness.proxy.addShaping(.loss(rate: 0.2, burst: 2, direction: .upstream), key: ShapingKey(occurrence: 1), to: nil)
            }
            let data = pattern(count: 300_000, seed: 11)
            let start = DispatchTime.now().uptimeNanoseconds
            let reader = Background { server.receive(exactly: data.count) }
            for offset in stride(from: 0, to: data.count, by: 1460) {
                try client.sendAll(Array(data[offset..<min(offset + 1460, data.count)]))
            }
            let got = try #require(reader.join())
            expectSameBytes(got, data)
            // About 40 of ~205 pieces lost: at least one 200 ms retransmission timeout passed.
            #expect(DispatchTime.now().uptimeNanoseconds - start >= 200_000_000)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    /// Counts, per port, the ESTABLISHED sockets `ss -tn` lists with that port at either end.
    /// How many ESTABLISHED sockets each of `connections` has on this machine (its two ends: 2 while it lives), from
    /// `ss`, each connection named by its two ports. Only a socket whose two ports are the connection's counts: `ss`
    /// lists every process's sockets, and another test's connection may hold one of the same ports as its ephemeral
    /// one (s55cq1: a socket of another lane's on the upstream listener's ephemeral port made it 4).
    func establishedLegs(_ connections: [(Int, Int)]) throws -> [Int] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ss", "-tnH", "state", "established"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var counts = [Int](repeating: 0, count: connections.count)
        for line in output.split(separator: "\n") {
            // Recv-Q, Send-Q, the local address:port, the peer's.
            let ports = line.split(separator: " ", omittingEmptySubsequences: true).filter { $0.contains(":") }
                .compactMap { $0.split(separator: ":").last.flatMap { Int($0) } }
            guard ports.count == 2 else { continue }
            for (index, ends) in connections.enumerated() where Set(ports) == Set([ends.0, ends.1]) { counts[index] += 1 }
        }
        return counts
    }
}
