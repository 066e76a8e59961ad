import ChaosCore
import Foundation
import Testing

@testable import ChaosProxy

/// A peer that sent its FIN and then closed its socket answers what the proxy writes to it next with a RST. NIO reports
/// that reset on a socket whose input had ended as a closure with no error (it reads nothing more, then closes on the
/// socket's error), so the NIO relay once took it for an orderly close: it recorded nothing after the peer's FIN and
/// passed nothing on. The audit then never learnt that the peer's application may not have read what its TCP had taken
/// (fresh-clone run s58q3: a grpcio server behind a partition took messages it never read, and their resend on the next
/// connection was counted redelivered, where tcpdump's audit of the same run, which saw the RST, counted none).
@Suite("Relays: a peer's reset after its own FIN is recorded and passed on", .timeLimit(.minutes(2)))
struct PeerResetAfterFINTests {
    @Test(
        "a server that closed its socket after its FIN resets the proxy's late bytes: [fin, reset] on its leg, a reset to the client",
        arguments: [true, false]
    )
    func resetAfterOwnFIN(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        server.close()  // its FIN; its kernel answers anything that comes after with a RST
        try await waitUntil("the server's FIN reached the proxy") { harness.events.closes(.server) == [.fin] }
        let ended = try await offPool { client.receive() }
        #expect(ended == .eof, "the server's FIN passed on to the client")
        try await offPool { try client.sendAll(Array("late\n".utf8)) }
        try await waitUntil("the server's reset recorded after its FIN: \(harness.events.closes(.server))") {
            harness.events.closes(.server) == [.fin, .reset]
        }
        // The client read the server's FIN, so its reads say only that (end of stream); its TCP state says whether
        // the proxy reset its leg (CLOSE) or left it open (CLOSE_WAIT).
        try await waitUntil("the client's leg reset: TCP state \(client.tcpState)") { client.tcpState == TestSocket.tcpClose }
        #expect(harness.events.closes(.client) == [.reset], "\(harness.events.closes(.client))")
        client.close()
        await harness.shutdown()
    }
}
