import ChaosCore
import Glibc
import Testing

@testable import ChaosProxy

@Suite("The connect deadline: one option for both relays", .serialized, .timeLimit(.minutes(5)))
struct ConnectTimeoutTests {
    @Test(
        "an upstream that never answers resets the client once ProxyServer.Options.connectTimeout passed, on either relay",
        arguments: [true, false]
    )
    func deadline(epollRelay: Bool) async throws {
        #expect(ProxyServer.Options().connectTimeout == .seconds(Int64(10)))
        let harness = try await ProxyHarness(epollRelay: epollRelay, connectTimeout: .milliseconds(300), upstreamBacklog: 0)
        // One connection fills the upstream's accept queue: its kernel then drops the proxy's SYN and the dial hangs.
        let filler = try await offPool { try TestSocket.connect(port: harness.upstream.port, timeout: 5) }
        let client = try await offPool { try TestSocket.connect(port: harness.port) }
        client.setTimeout(5)  // half the default deadline: only the option can reset the client in time
        let received = try await offPool { client.receive() }
        #expect(received == .error(ECONNRESET))
        let refusals = harness.events.all.filter { if case .refused = $0.kind { true } else { false } }
        #expect(refusals.count == 1)
        #expect(harness.proxy.counters.opened == 0)
        client.close()
        filler.close()
        await harness.shutdown()
    }
}
