import ChaosCore
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// A real UDP proxy on 127.0.0.1 (port 0) in front of a real UDP socket, with its event stream kept.
final class DatagramHarness: Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let server: UDPTestSocket
    let proxy: ProxyServer
    let events: EventRecorder
    /// The epoll relay threads of a proxy whose datagrams may take the fast path.
    let epollRelay: EpollRelayLoopGroup?

    /// With `fastPath`, the proxy records no bytes and has epoll relay threads, as `chaos proxy` runs: its datagrams
    /// take ``DatagramFastPath`` until a fault touches them.
    init(options: ProxyServer.Options = ProxyServer.Options(), seed: UInt64 = 7, fastPath: Bool = false) async throws {
        server = try UDPTestSocket()
        events = EventRecorder(recordsTraffic: !fastPath)
        epollRelay = fastPath ? try EpollRelayLoopGroup(threads: 1, busyPoll: .zero) : nil
        var options = options
        if let epollRelay { options.epollRelay = epollRelay }
        proxy = ProxyServer(
            spec: ProxySpec(
                name: "udp",
                listen: HostPort(host: "127.0.0.1", port: 0),
                upstream: HostPort(host: "127.0.0.1", port: server.port),
                transport: .udp
            ),
            group: group,
            sink: events,
            clock: RunClock(),
            ids: ConnectionIDSource(),
            seed: SeededGenerator(seed: seed),
            options: options
        )
        try await proxy.start()
    }

    /// The proxy's listening port.
    var port: Int { proxy.boundAddress?.port ?? 0 }

    func shutdown() async throws {
        await proxy.stop()
        epollRelay?.shutdown()
        try await group.shutdownGracefully()
    }

    /// How many `.closed` events the proxy recorded.
    var closed: Int { events.all.filter { if case .closed = $0.kind { true } else { false } }.count }

    /// How many events of each kind the proxy recorded for `side` (`read`, `written`), and its flows opened.
    func count(_ what: String, _ side: Side) -> Int {
        events.all.filter {
            switch $0.kind {
            case .read(let eventSide, _): what == "read" && eventSide == side
            case .written(let eventSide, _): what == "written" && eventSide == side
            case .acknowledged(let eventSide, _): what == "acknowledged" && eventSide == side
            default: false
            }
        }.count
    }

    var opened: Int { events.all.filter { if case .opened = $0.kind { true } else { false } }.count }

    /// Two clients through the proxy: A sends, B sends, A sends again, and the server answers each at the port it saw;
    /// checks that each client is a flow with its own mapping, kept, and that the answers come back from the proxy's
    /// address. With `stranger`, a third socket also sends to A's mapping, and nothing of it reaches A (a NAT that
    /// filters by endpoint).
    func twoClientsExchange(stranger: Bool = false) async throws {
        let port = self.port
        let server = self.server
        let (fromA, fromB, againA) = try await offPool {
            let a = try UDPTestSocket()
            let b = try UDPTestSocket()
            a.send("a1", to: port)
            let first = server.receiveText()
            b.send("b1", to: port)
            let second = server.receiveText()
            a.send("a2", to: port)
            let third = server.receiveText()
            if let first { server.send("to-a", to: first.fromPort) }
            if let second { server.send("to-b", to: second.fromPort) }
            if stranger, let first { try UDPTestSocket().send("not the server", to: first.fromPort) }
            let answerA = a.receiveText()
            let answerB = b.receiveText()
            #expect(answerA?.text == "to-a" && answerA?.fromPort == port, "the answer comes from the address the client sent to")
            #expect(answerB?.text == "to-b" && answerB?.fromPort == port)
            if stranger { #expect(a.drain(quiet: 0.3).isEmpty, "nothing from elsewhere reaches the client") }
            #expect(first?.fromPort != a.port, "the server sees the proxy's port, not the client's")
            return (first, second, third)
        }
        #expect(fromA?.text == "a1" && fromB?.text == "b1" && againA?.text == "a2")
        #expect(fromA?.fromPort != fromB?.fromPort, "two clients, two mappings")
        #expect(fromA?.fromPort == againA?.fromPort, "one client keeps its mapping")
    }

    /// `client` sends one datagram through the proxy; returns the port the server saw it come from (its mapping).
    func mapping(of client: UDPTestSocket, text: String = "before") async throws -> Int {
        let port = self.port
        let server = self.server
        return try await offPool { () -> Int in
            client.send(text, to: port)
            return server.receiveText()?.fromPort ?? 0
        }
    }

    /// Waits (at most 5 s, polling every 100 µs) until `condition` holds.
    static func waitFor(_ condition: () -> Bool) {
        for _ in 0..<50_000 where !condition() { usleep(100) }
    }
}

@Suite("UDP proxies over real sockets")
struct DatagramProxyTests {
    @Test("each client address is a flow with its own upstream port, as a NAT maps it; answers go back to the client that asked")
    func aFlowPerClientAddress() async throws {
        // Flows that cannot idle out while the test runs: held beside a full unit lane on two cores, it once took 245 s
        // and its two flows had ended after the default 60 s of quiet before it counted them.
        var options = ProxyServer.Options()
        options.udpIdleTimeout = 3_600_000_000_000
        let harness = try await DatagramHarness(options: options)
        try await harness.twoClientsExchange()
        // The proxy records a write just after the kernel took it: the receiver may have read it first.
        try await waitUntil("the proxy's events of the last write") { harness.count("acknowledged", .client) == 2 }
        #expect(harness.proxy.liveConnections.count == 2)
        #expect(harness.opened == 2)
        #expect(harness.count("read", .client) == 3 && harness.count("written", .server) == 3)
        #expect(harness.count("read", .server) == 2 && harness.count("written", .client) == 2)
        #expect(harness.count("acknowledged", .client) == 2, "a datagram the kernel took is delivered as far as the proxy knows")
        #expect(harness.proxy.counters.datagrams == 5)
        try await harness.shutdown()
    }

    @Test(
        "a UDP proxy's port is its own: a socket with SO_REUSEADDR cannot bind it (and take its clients' datagrams), on the fast path or after a fault moved it to NIO",
        arguments: [false, true]
    )
    func listeningPortIsItsOwn(fastPath: Bool) async throws {
        let harness = try await DatagramHarness(fastPath: fastPath)
        func sharing() -> Int32? {
            do {
                _ = try UDPTestSocket(port: harness.port, reuseAddress: true)
                return nil
            } catch {
                return (error as? POSIXError)?.code.rawValue ?? -1
            }
        }
        // s81q1: another test's socket with SO_REUSEADDR was given the listening port for port 0 and took 152 datagrams.
        #expect(sharing() == EADDRINUSE)
        #expect(await harness.proxy.addShaping(.loss(rate: 0, burst: 1, direction: .upstream), key: ShapingKey(occurrence: 1), to: nil) == 0)
        let client = try UDPTestSocket()
        #expect(client.send("after", to: harness.port) == 0)
        #expect(harness.server.receive()?.bytes == Array("after".utf8))
        #expect(sharing() == EADDRINUSE)
        try await harness.shutdown()
    }

    @Test(
        "a burst sent while the relay's thread is busy waits in the listening socket's buffer: 2,000 datagrams, all read once it runs again (fast path and NIO)",
        arguments: [false, true]
    )
    func burstWaitsForTheRelay(fastPath: Bool) async throws {
        let harness = try await DatagramHarness(fastPath: fastPath)
        let client = try UDPTestSocket()
        _ = try await harness.mapping(of: client)
        let dropsBefore = DatagramFastPathTests.kernelDrops(ports: [harness.port])
        // The relay's thread sleeps for 300 ms while the client sends; the default 208 KiB buffer held about 256 of these.
        let busy: @Sendable () -> Void = { usleep(300_000) }
        if let relay = harness.epollRelay { relay.loops[0].execute(busy) } else { harness.group.next().execute(busy) }
        try await offPool {
            for index in 0..<2_000 { _ = client.send("\(index)", to: harness.port) }
        }
        try await waitUntil("every datagram read", seconds: 20) { harness.proxy.counters.datagrams >= 2_001 }
        #expect(harness.proxy.counters.datagrams == 2_001)
        #expect(DatagramFastPathTests.kernelDrops(ports: [harness.port]) == dropsBefore, "none dropped at the listening socket")
        try await harness.shutdown()
    }

    @Test("seeded loss drops datagrams, counted: what the server read plus the drops is what the client sent, and the same seed drops the same ones")
    func seededLoss() async throws {
        var runs: [[Int]] = []
        for _ in 0..<2 {
            let harness = try await DatagramHarness(seed: 11)
            await harness.proxy.addShaping(.loss(rate: 0.3, burst: 2, direction: .upstream), key: ShapingKey(occurrence: 1), to: nil)
            let port = harness.port
            let server = harness.server
            let proxy = harness.proxy
            let received = try await offPool {
                let client = try UDPTestSocket()
                return server.collecting {
                    // One at a time, each read by the proxy before the next goes: a proxy held off the CPU (a loaded
                    // machine) would otherwise find its socket's buffer overflowed, and the draws fall on other datagrams.
                    for index in 0..<400 {
                        client.send("\(index)", to: port)
                        DatagramHarness.waitFor { proxy.counters.datagrams == Int64(index + 1) }
                    }
                }.map { Int(String(decoding: $0.bytes, as: UTF8.self)) ?? -1 }
            }
            let dropped = harness.proxy.counters.datagramsDropped[.loss] ?? 0
            #expect(received.count + Int(dropped) == 400, "\(received.count) read, \(dropped) dropped")
            #expect((60...180).contains(dropped), "about 30 % lost: \(dropped)")
            #expect(received == received.sorted(), "no latency: no reordering")
            runs.append(received)
            try await harness.shutdown()
        }
        #expect(runs[0] == runs[1], "the same seed loses the same datagrams")
    }

    @Test("jitter reorders datagrams (each is delayed on its own), and nothing is lost")
    func jitterReorders() async throws {
        let harness = try await DatagramHarness()
        await harness.proxy.addShaping(
            .latency(add: .milliseconds(30), jitter: .milliseconds(25), direction: .upstream),
            key: ShapingKey(occurrence: 1),
            to: nil
        )
        let port = harness.port
        let server = harness.server
        let received = try await offPool {
            let client = try UDPTestSocket()
            return server.collecting {
                for index in 0..<100 {
                    client.send("\(index)", to: port)
                    Thread.sleep(forTimeInterval: 0.002)
                }
            }.map { Int(String(decoding: $0.bytes, as: UTF8.self)) ?? -1 }
        }
        #expect(received.sorted() == Array(0..<100), "every datagram came once")
        #expect(received != received.sorted(), "some came out of order")
        try await harness.shutdown()
    }

    @Test("a partition drops both ways while it lasts (a dead path holds nothing); datagrams over a mtu fault's size are dropped, smaller ones pass")
    func partitionAndMTU() async throws {
        let harness = try await DatagramHarness()
        let port = harness.port
        let server = harness.server
        let client = try UDPTestSocket()
        let mapping = try await offPool { () -> Int in
            client.send("hello", to: port)
            return server.receiveText()?.fromPort ?? 0
        }
        await harness.proxy.addShaping(.partition(direction: .both), key: ShapingKey(occurrence: 1), to: nil)
        let during = try await offPool { () -> (Int, Int) in
            client.send("lost", to: port)
            server.send("lost too", to: mapping)
            return (server.drain(quiet: 0.3).count, client.drain(quiet: 0.3).count)
        }
        #expect(during == (0, 0))
        #expect(harness.proxy.counters.datagramsDropped[.deadPath] == 2)
        await harness.proxy.removeShaping(key: ShapingKey(occurrence: 1))
        await harness.proxy.addShaping(.mtu(size: 1_200, direction: .both), key: ShapingKey(occurrence: 2), to: nil)
        let after = try await offPool { () -> [Int] in
            client.send([UInt8](repeating: 1, count: 1_172), to: port)  // 1,200 with its UDP and IP headers
            client.send([UInt8](repeating: 2, count: 1_173), to: port)
            client.send("small", to: port)
            return server.drain(quiet: 0.3).map(\.bytes.count)
        }
        #expect(after == [1_172, 5])
        #expect(harness.proxy.counters.datagramsDropped[.mtu] == 1)
        try await harness.shutdown()
    }

    @Test("a quiet flow ends after the idle timeout (the next datagram makes a new mapping); past the cap on flows a new address is dropped, counted")
    func idleTimeoutAndFlowCap() async throws {
        var options = ProxyServer.Options()
        options.udpIdleTimeout = 2_000_000_000
        options.maxFlows = 1
        let harness = try await DatagramHarness(options: options)
        let port = harness.port
        let server = harness.server
        let (first, refused, second) = try await offPool {
            let client = try UDPTestSocket()
            let other = try UDPTestSocket()
            client.send("one", to: port)
            let first = server.receiveText()?.fromPort
            other.send("no room", to: port)
            let refused = server.drain(quiet: 0.2).count
            Thread.sleep(forTimeInterval: 3.0)  // past the idle timeout and the sweep after it
            client.send("two", to: port)
            return (first, refused, server.receiveText()?.fromPort)
        }
        #expect(refused == 0)
        #expect(harness.proxy.counters.datagramsDropped[.flowLimit] == 1)
        #expect(first != nil && second != nil && first != second, "a new mapping after the idle timeout")
        // The second flow may idle out too before this reads the events, on a machine that holds this thread.
        let closes = harness.events.closes(.client)
        #expect(!closes.isEmpty && closes.allSatisfy { $0 == .fin }, "the idle flow ended: \(closes)")
        #expect(harness.opened == 2)
        try await harness.shutdown()
    }

    @Test("a NAT that forgets an idle flow: the server's answer to the old mapping goes nowhere, the client's next datagram comes from a new one")
    func natForgets() async throws {
        let harness = try await DatagramHarness()
        await harness.proxy.addShaping(.nat(idleTimeout: .milliseconds(200)), key: ShapingKey(occurrence: 1), to: nil)
        let port = harness.port
        let server = harness.server
        let (old, answered, new) = try await offPool {
            let client = try UDPTestSocket()
            client.send("before", to: port)
            let old = server.receiveText()?.fromPort ?? 0
            Thread.sleep(forTimeInterval: 0.4)
            server.send("late answer", to: old)
            let answered = client.drain(quiet: 0.3).count
            client.send("after", to: port)
            return (old, answered, server.receiveText()?.fromPort)
        }
        #expect(answered == 0, "the forgotten mapping took nothing back")
        #expect(new != nil && new != old)
        #expect(harness.proxy.counters.datagramsDropped[.nat] == 1)
        let deaths = harness.events.all.filter { if case .path(.natExpired) = $0.kind { true } else { false } }
        #expect(deaths.count == 1)
        try await harness.shutdown()
    }

    @Test("duplicate sends a share of datagrams twice, reorder holds a share back until the next one has gone; both counted")
    func duplicateAndReorder() async throws {
        let harness = try await DatagramHarness(seed: 5)
        await harness.proxy.addShaping(.duplicate(rate: 0.1, direction: .upstream), key: ShapingKey(occurrence: 1), to: nil)
        await harness.proxy.addShaping(.reorder(rate: 0.1, direction: .upstream), key: ShapingKey(occurrence: 2), to: nil)
        let port = harness.port
        let server = harness.server
        let proxy = harness.proxy
        let received = try await offPool {
            let client = try UDPTestSocket()
            return server.collecting {
                for index in 0..<300 {
                    client.send("\(index)", to: port)
                    DatagramHarness.waitFor { proxy.counters.datagrams == Int64(index + 1) }
                    Thread.sleep(forTimeInterval: 0.001)
                }
            }.map { Int(String(decoding: $0.bytes, as: UTF8.self)) ?? -1 }
        }
        let altered = harness.proxy.counters.datagramsAltered
        let duplicated = Int(altered[.duplicated] ?? 0)
        let heldBack = Int(altered[.heldBack] ?? 0)
        #expect(Set(received) == Set(0..<300), "nothing lost")
        #expect(received.count == 300 + duplicated, "each duplicate arrived once more")
        #expect((10...60).contains(duplicated) && (10...60).contains(heldBack), "about 10 % each: \(duplicated), \(heldBack)")
        var highest = -1
        var seen = Set<Int>()
        var reordered = 0
        for value in received where seen.insert(value).inserted {
            if value < highest { reordered += 1 } else { highest = value }
        }
        // A datagram held back right after another held one goes when that one is held, overtaken by none.
        #expect(reordered > 0 && reordered <= heldBack, "\(reordered) arrived after a later one, \(heldBack) held back")
        try await harness.shutdown()
    }

    @Test("rebind moves a flow to a new upstream-facing port: the server sees the new port, its answers to the old one go nowhere")
    func rebindChangesTheMapping() async throws {
        let harness = try await DatagramHarness()
        let port = harness.port
        let server = harness.server
        let client = try UDPTestSocket()
        let before = try await offPool { () -> Int in
            client.send("before", to: port)
            return server.receiveText()?.fromPort ?? 0
        }
        #expect(await harness.proxy.rebindFlows(nil) == 1)
        try await waitUntil("the flow rebound") { harness.proxy.counters.flowsRebound == 1 }
        let (after, toOld, toNew) = try await offPool {
            client.send("after", to: port)
            let after = server.receiveText()?.fromPort ?? 0
            server.send("to the old port", to: before)
            let toOld = client.drain(quiet: 0.3).count
            server.send("to the new port", to: after)
            return (after, toOld, client.receiveText()?.text)
        }
        #expect(after != 0 && after != before, "a new mapping: \(before) then \(after)")
        #expect(toOld == 0)
        #expect(toNew == "to the new port")
        #expect(harness.proxy.liveConnections.count == 1, "the same flow")
        // Said in the events, for the QUIC path watch: the flow moved.
        let moves = harness.events.all.filter { if case .path(.rebound) = $0.kind { true } else { false } }
        #expect(moves.count == 1 && moves.first?.connection == harness.proxy.liveConnections.first)
        try await harness.shutdown()
    }

    @Test(
        "a handoff with new_address: in its blackout the flow's datagrams are dropped; after it the same flow reaches the server from the new address, and the server's answers to the old mapping go nowhere"
    )
    func handoffMovesTheFlowToTheNewAddress() async throws {
        let harness = try await DatagramHarness()
        let port = harness.port
        let server = harness.server
        let client = try UDPTestSocket()
        let before = try await offPool { () -> (host: String, port: Int)? in
            client.send("before", to: port)
            return server.receiveTextWithAddress().map { ($0.host, $0.port) }
        }
        #expect(before?.host == "127.0.0.1")
        let start = ChaosDuration(nanoseconds: harness.proxy.clock.now()) + .milliseconds(200)
        let handoff = FaultOccurrence(
            index: 0,
            rule: 0,
            at: start,
            lasts: .milliseconds(1_500),
            proxy: nil,
            targets: .all,
            seed: 1,
            effect: .handoff(
                from: LinkProfile.named("wifi")!,
                to: LinkProfile.named("wifi")!,
                blackout: .milliseconds(1_500),
                linger: .zero,
                newAddress: ["127.0.0.2"]
            )
        )
        let injector = FaultInjector(
            timeline: Timeline(seed: 1, duration: .seconds(Int64(10)), occurrences: [handoff]),
            proxies: [harness.proxy],
            clock: harness.proxy.clock,
            sink: harness.events
        )
        let running = Task { await injector.run() }
        try await waitUntil("the blackout began") { !injector.appliedSoFar.isEmpty }
        // Sent in the blackout: dropped, unless the proxy (a niced test lane's, on a loaded machine) reads it only after
        // the blackout ended, when it passes; the proxy's drop count says which.
        try await offPool { client.send("in the blackout", to: port) }
        // The handoff's end moves the flow first and lifts the blackout after (a datagram in between is still the
        // blackout's): "after" is sent once the injector recorded the end, when both are done.
        try await waitUntil("the handoff ended", seconds: 30) {
            harness.events.all.contains { if case .faultEnded = $0.kind { true } else { false } }
        }
        #expect(harness.proxy.counters.flowsRebound == 1, "the flow moved")
        let (after, blackoutPassed, toOld, toNew) = try await offPool {
            client.send("after", to: port)
            var after: (text: String, host: String, port: Int)?
            var blackoutPassed = false
            for _ in 0..<2 {
                after = server.receiveTextWithAddress()
                guard after?.text == "in the blackout" else { break }
                blackoutPassed = true
            }
            if let before { server.send("to the old mapping", to: before.port, host: before.host) }
            let toOld = client.drain(quiet: 0.3).count
            client.setTimeout(2)
            if let after { server.send("to the new mapping", to: after.port, host: after.host) }
            return (after, blackoutPassed, toOld, client.receiveText()?.text)
        }
        #expect(after?.text == "after" && after?.host == "127.0.0.2", "the server sees the phone's new address: \(String(describing: after))")
        #expect(toOld == 0)
        #expect(toNew == "to the new mapping")
        #expect(harness.proxy.liveConnections.count == 1, "the same flow")
        let dropped = harness.proxy.counters.datagramsDropped[.deadPath, default: 0]
        #expect(blackoutPassed == (dropped == 0), "what was sent in the blackout was dropped (\(dropped)) or, read after it, passed")
        running.cancel()
        _ = await running.value
        try await harness.shutdown()
    }

    @Test("a server not listening yet ends nothing: once it is up, the flow's next datagram reaches it from the same mapping")
    func serverUpLater() async throws {
        // A port nobody listens on yet: the first datagrams meet ICMP "port unreachable".
        let upstreamPort = try UDPTestSocket().port
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let proxy = ProxyServer(
            spec: ProxySpec(
                name: "udp",
                listen: HostPort(host: "127.0.0.1", port: 0),
                upstream: HostPort(host: "127.0.0.1", port: upstreamPort),
                transport: .udp
            ),
            group: group,
            sink: EventRecorder(),
            clock: RunClock(),
            ids: ConnectionIDSource(),
            seed: SeededGenerator(seed: 1)
        )
        try await proxy.start()
        let port = proxy.boundAddress?.port ?? 0
        let (late, again) = try await offPool {
            let client = try UDPTestSocket()
            // A burst: the proxy writes several in one turn of its loop, the later ones after the first one's ICMP.
            for _ in 0..<50 { client.send("nobody there", to: port) }
            Thread.sleep(forTimeInterval: 0.2)
            let server = try UDPTestSocket(port: upstreamPort)
            client.send("late", to: port)
            // The burst's last datagrams may reach the server first: a proxy that a loaded machine (the niced unit lane)
            // held for longer than the pause above writes them once the server listens, and they pass, as they should.
            var late = server.receiveText()
            for _ in 0..<50 where late?.text == "nobody there" { late = server.receiveText() }
            client.send("again", to: port)
            return (late, server.receiveText())
        }
        #expect(late?.text == "late" && again?.text == "again", "\(String(describing: late)), \(String(describing: again))")
        #expect(late?.fromPort == again?.fromPort, "one mapping")
        #expect(proxy.counters.datagramsDropped.isEmpty, "\(proxy.counters.datagramsDropped)")
        await proxy.stop()
        try await group.shutdownGracefully()
    }
}
