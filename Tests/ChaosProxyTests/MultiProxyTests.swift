import ChaosCore
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import ChaosControl
@testable import ChaosProxy

@Suite("Several named proxies in one run", .timeLimit(.minutes(5)))
struct MultiProxyTests {
    @Test("a fault that names one proxy hits that proxy's connections only")
    func faultOnOneProxy() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let upstreamA = try TestListener()
        let upstreamB = try TestListener()
        let ids = ConnectionIDSource()
        let clock = RunClock()
        let events = EventRecorder()
        func proxy(_ name: String, _ upstream: TestListener) -> ProxyServer {
            ProxyServer(
                spec: ProxySpec(
                    name: name,
                    listen: HostPort(host: "127.0.0.1", port: 0),
                    upstream: HostPort(host: "127.0.0.1", port: upstream.port)
                ),
                group: group,
                sink: events,
                clock: clock,
                ids: ids,
                seed: SeededGenerator(seed: 1)
            )
        }
        let a = proxy("chat", upstreamA)
        let b = proxy("telemetry", upstreamB)
        try await a.start()
        try await b.start()
        let portA = try #require(a.boundAddress?.port)
        let portB = try #require(b.boundAddress?.port)
        let occurrence = FaultOccurrence(
            index: 0,
            rule: 0,
            at: .zero,
            lasts: .zero,
            proxy: "telemetry",
            targets: .all,
            seed: 1,
            effect: .disconnect(mode: .reset, linger: .zero)
        )
        let injector = FaultInjector(
            timeline: Timeline(seed: 1, duration: .seconds(Int64(1)), occurrences: [occurrence]),
            proxies: [a, b],
            clock: RunClock(),
            sink: events
        )
        let sockets = try await offPool { () -> [TestSocket] in
            let clientA = try TestSocket.connect(port: portA)
            let serverA = try upstreamA.accept()
            let clientB = try TestSocket.connect(port: portB)
            let serverB = try upstreamB.accept()
            return [clientA, serverA, clientB, serverB]
        }
        try await waitUntil("both proxies have their connection") { a.liveConnections.count + b.liveConnections.count == 2 }
        await injector.run()
        #expect(injector.appliedSoFar.map(\.connections) == [1])
        try await offPool {
            #expect(sockets[2].receiveUntilEnd().1 == .error(ECONNRESET), "telemetry was not cut")
            try sockets[0].sendAll([42])
            #expect(sockets[1].receive(exactly: 1) == [42], "chat was disturbed")
            for socket in sockets { socket.close() }
        }
        #expect(Set(events.all.compactMap { if case .opened(let e) = $0.kind { e.proxy } else { nil } }) == ["chat", "telemetry"])
        await a.stop()
        await b.stop()
        upstreamA.close()
        upstreamB.close()
        try await group.shutdownGracefully()
    }
}
