import ChaosCore
import Foundation
import Glibc
import NIOCore
import Synchronization
import Testing

@testable import ChaosProxy

@Suite("Epoll relay and the move to NIO", .serialized, .timeLimit(.minutes(5)))
struct EpollRelayTests {
    /// Waits (bounded) until `condition` holds; fails the test when it never does.
    func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitUntil("the condition at \(sourceLocation)", condition)
    }

    @Test("by default a direction is read and written until a read fills the buffer, then spliced: 24 MB each way arrive unchanged")
    func bulkSwitchesToSplice() async throws {
        let harness = try await ProxyHarness(recordsTraffic: false, splice: .bulk)
        let size = 24 * 1024 * 1024
        let up = pattern(count: size, seed: 7)
        let down = pattern(count: size, seed: 8)
        // A small exchange first: read and written, nothing spliced.
        let (client, server) = try await offPool { try harness.connectPair() }
        try await offPool {
            try client.sendAll(Array("hello".utf8))
            #expect(server.receive(exactly: 5) == Array("hello".utf8))
        }
        #expect(harness.proxy.counters.spliced == 0)
        let (serverGot, clientGot) = try await offPool { TwoWayTransfer(client: client, server: server, up: up, down: down).join() }
        expectSameBytes(serverGot, up)
        expectSameBytes(clientGot, down)
        let counters = harness.proxy.counters
        #expect(counters.upstream == Int64(size + 5) && counters.downstream == Int64(size))
        #expect(counters.spliced > Int64(size) && counters.spliced < Int64(2 * size), "spliced \(counters.spliced) of \(2 * size)")
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test(
        "a fault reaching a connection mid-stream moves it to NIO, and 40 MB each way still arrive unchanged (read and written, or spliced)",
        arguments: [true, false]
    )
    func movesMidStream(recordsTraffic: Bool) async throws {
        let harness = try await ProxyHarness(recordsTraffic: recordsTraffic)
        let size = 40 * 1024 * 1024
        let up = pattern(count: size, seed: 3)
        let down = pattern(count: size, seed: 4)
        let (client, server) = try await offPool { try harness.connectPair() }
        try await eventually { harness.proxy.epollRelayConnections.count == 1 }
        let id = try #require(harness.proxy.epollRelayConnections.first)
        // The readers wait until the fault is on: the writers fill what the sockets and the proxy hold (far less
        // than 40 MB) and stop, so the fault lands mid-stream however fast or loaded the machine is.
        let gate = DispatchSemaphore(value: 0)
        let transfer = TwoWayTransfer(client: client, server: server, up: up, down: down, gate: gate)
        try await eventually { harness.proxy.counters.upstream > 0 && harness.proxy.counters.downstream > 0 }
        let reached = await harness.proxy.addShaping(
            .latency(add: .milliseconds(1), jitter: .zero, direction: .both),
            key: ShapingKey(occurrence: 1),
            to: [id]
        )
        gate.signal()
        gate.signal()
        #expect(reached == 1)
        #expect(harness.proxy.epollRelayConnections.isEmpty)
        #expect(harness.proxy.liveConnections == [id])
        #expect(harness.proxy.counters.upstream < Int64(size), "the fault came after the transfer ended")
        let (serverGot, clientGot) = try await offPool { transfer.join() }
        expectSameBytes(serverGot, up)
        expectSameBytes(clientGot, down)
        #expect(harness.proxy.counters.upstream == Int64(size))
        #expect(harness.proxy.counters.downstream == Int64(size))
        #expect(harness.proxy.counters.opened == 1)
        #expect((harness.proxy.counters.spliced > 0) == !recordsTraffic, "spliced \(harness.proxy.counters.spliced)")
        let opened = harness.events.all.filter { if case .opened = $0.kind { true } else { false } }
        #expect(opened.count == 1)
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test("bytes a slow server left with the epoll relay (read, or in a splice pipe) move with the connection, in order", arguments: [true, false])
    func heldBytesMove(recordsTraffic: Bool) async throws {
        let harness = try await ProxyHarness(recordsTraffic: recordsTraffic)
        let size = 16 * 1024 * 1024
        let up = pattern(count: size, seed: 5)
        let (client, server) = try await offPool { try harness.connectPair() }
        let clientWriter = Background { (try? client.sendAll(up)) != nil }
        // The server reads nothing yet: the client's writes stall once every buffer on the way is full.
        var last: Int64 = -1
        try await eventually {
            defer { last = harness.proxy.counters.upstream }
            return last == harness.proxy.counters.upstream && last > 0
        }
        #expect(harness.proxy.counters.upstream < Int64(size))
        let id = try #require(harness.proxy.liveConnections.first)
        let reached = await harness.proxy.addShaping(
            .latency(add: .milliseconds(1), jitter: .zero, direction: .upstream),
            key: ShapingKey(occurrence: 1),
            to: [id]
        )
        #expect(reached == 1)
        #expect(harness.proxy.epollRelayConnections.isEmpty)
        let got = try await offPool { server.receive(exactly: size) }
        #expect(clientWriter.join() == true)
        expectSameBytes(got, up)
        guard recordsTraffic else {
            #expect(harness.proxy.counters.spliced > 0)
            client.close()
            server.close()
            return await harness.shutdown()
        }
        // What the relay wrote, as its events say, is exactly what the client sent. (A write's event
        // is recorded once the socket took the bytes, so the server can read them a moment before.)
        func written() -> [UInt8] {
            harness.events.all.flatMap { event -> [UInt8] in
                if case .written(.server, let bytes) = event.kind { bytes } else { [] }
            }
        }
        try await eventually { written().count >= size }
        expectSameBytes(written(), up, "the written events")
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test("a connection half-closed on the epoll relay keeps its state in NIO: the reply and FIN still reach the client")
    func halfCloseMoves() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            try client.sendAll(Array("request".utf8))
            client.shutdownWrite()
            let (request, end) = server.receiveUntilEnd()
            #expect(request == Array("request".utf8))
            #expect(end == .eof)
            let id = try #require(harness.proxy.epollRelayConnections.first)
            let reached = try blockingAwait {
                await harness.proxy.addShaping(
                    .latency(add: .milliseconds(5), jitter: .zero, direction: .downstream),
                    key: ShapingKey(occurrence: 1),
                    to: [id]
                )
            }
            #expect(reached == 1)
            #expect(harness.proxy.epollRelayConnections.isEmpty)
            try server.sendAll(Array("reply after your FIN".utf8))
            server.shutdownWrite()
            let (reply, clientEnd) = client.receiveUntilEnd()
            #expect(String(decoding: reply, as: UTF8.self) == "reply after your FIN")
            #expect(clientEnd == .eof)
            client.close()
            server.close()
        }
        try await eventually { harness.proxy.liveConnections.isEmpty }
        #expect(harness.events.closes(.client) == [.fin])
        #expect(harness.events.closes(.server) == [.fin])
        await harness.shutdown()
    }

    @Test("connections that start under a link profile or a fault on every connection go to NIO from the start")
    func shapedConnectionsStartInNIO() async throws {
        let profiled = try await ProxyHarness(baseline: LinkProfile.named("wifi"))
        try await offPool {
            let (client, server) = try profiled.connectPair()
            try blockingAwait { try await profiled.waitForConnections(1) }
            #expect(profiled.proxy.epollRelayConnections.isEmpty)
            #expect(profiled.proxy.liveConnections.count == 1)
            client.close()
            server.close()
        }
        await profiled.shutdown()

        let harness = try await ProxyHarness()
        await harness.proxy.addShaping(.latency(add: .milliseconds(1), jitter: .zero, direction: .both), key: ShapingKey(occurrence: 1), to: nil)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try blockingAwait { try await harness.waitForConnections(1) }
            #expect(harness.proxy.epollRelayConnections.isEmpty)
            try client.sendAll(Array("ping".utf8))
            #expect(server.receive(exactly: 4) == Array("ping".utf8))
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("the same exchange gives the same events on the epoll relay and in NIO")
    func eventsMatchNIO() async throws {
        /// The events in order (acknowledgements apart: when a poll sees them differs), then the last
        /// acknowledged offset per side.
        func exchange(epollRelay: Bool) async throws -> (events: [String], acknowledged: [Side: Int64]) {
            let harness = try await ProxyHarness(epollRelay: epollRelay)
            try await offPool {
                let (client, server) = try harness.connectPair()
                try client.sendAll(Array("hello".utf8))
                #expect(server.receive(exactly: 5) == Array("hello".utf8))
                try server.sendAll(Array("world!".utf8))
                #expect(client.receive(exactly: 6) == Array("world!".utf8))
                client.shutdownWrite()
                _ = server.receiveUntilEnd()
                server.shutdownWrite()
                _ = client.receiveUntilEnd()
                client.close()
                server.close()
            }
            try await eventually { harness.proxy.liveConnections.isEmpty }
            await harness.shutdown()
            var acknowledged: [Side: Int64] = [:]
            for event in harness.events.all {
                if case .acknowledged(let side, let offset) = event.kind { acknowledged[side] = offset }
            }
            return (
                harness.events.all.compactMap { event -> String? in
                    switch event.kind {
                    case .acknowledged: nil
                    case .opened(let endpoints):
                        "opened \(endpoints.proxy) client \(endpoints.client.hasPrefix("127.0.0.1:")) server \(endpoints.server == "127.0.0.1:\(harness.upstream.port)")"
                    case .read(let side, let bytes): "read \(side) \(String(decoding: bytes, as: UTF8.self))"
                    case .written(let side, let bytes): "written \(side) \(String(decoding: bytes, as: UTF8.self))"
                    default: "\(event.kind)"
                    }
                }, acknowledged
            )
        }
        let nio = try await exchange(epollRelay: false)
        let epollRelay = try await exchange(epollRelay: true)
        #expect(nio.events.first == "opened test client true server true")
        #expect(epollRelay.events == nio.events)
        // Each peer's TCP acknowledged every byte written to it, and both relays saw it before closing.
        #expect(nio.acknowledged == [.server: 5, .client: 6])
        #expect(epollRelay.acknowledged == [.server: 5, .client: 6])
    }

    @Test("an unreachable upstream resets the client and is counted, as in NIO")
    func unreachableUpstream() async throws {
        let harness = try await ProxyHarness()
        harness.upstream.close()
        let outcome = try await offPool { () -> TestSocket.Received in
            let client = try TestSocket.connect(port: harness.port)
            defer { client.close() }
            return client.receive()
        }
        #expect(outcome == .error(ECONNRESET))
        try await eventually { harness.proxy.counters.upstreamFailures == 1 && harness.proxy.liveConnections.isEmpty }
        #expect(harness.proxy.counters.upstreamFailures == 1)
        #expect(harness.proxy.liveConnections.isEmpty)
        #expect(harness.events.all.contains { if case .refused = $0.kind { true } else { false } })
        await harness.shutdown()
    }

    @Test("stopping the proxy resets epoll relay connections")
    func stopResets() async throws {
        let harness = try await ProxyHarness()
        let (client, server) = try await offPool { try harness.connectPair() }
        try await eventually { harness.proxy.epollRelayConnections.count == 1 }
        await harness.proxy.stop()
        let (clientEnd, serverEnd) = try await offPool { (client.receive(), server.receive()) }
        #expect(clientEnd == .error(ECONNRESET))
        #expect(serverEnd == .error(ECONNRESET))
        #expect(harness.proxy.liveConnections.isEmpty)
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test("a task handed to a stopped relay thread is refused, not run on the caller's thread, and nobody waits forever")
    func stoppedLoopRefusesTasks() async throws {
        let group = try EpollRelayLoopGroup(threads: 1, busyPoll: .zero)
        let loop = try #require(group.loops.first)
        #expect(await loop.submit { 1 } == 1)
        group.shutdown()
        let ran = Mutex(false)
        #expect(!loop.execute { ran.withLock { $0 = true } })
        #expect(await loop.submit { 2 } == nil)
        #expect(!ran.withLock { $0 })
        #expect(loop.isStopped)
        group.shutdown()
    }
}
