import ChaosCore
import NIOCore
import NIOSSL
import Testing

@testable import ChaosProxy

/// How a TLS leg's end reaches the relay: NIO's TLS handler calls every end of the socket that came with no
/// close_notify unclean, a reset (which NIO reports with no error event when a write met it) as much as a FIN.
@Suite("TLS leg ends: a reset under TLS is a reset, a FIN with no close_notify is a TLS failure")
struct TLSLegEndTests {
    /// A connection whose legs carry TLS record maps, and the TLS failures it reports.
    final class TLSConnection {
        let embedded: EmbeddedConnection
        var failures: [(Side, String)] = []

        init() throws {
            embedded = try EmbeddedConnection()
            embedded.connection.recordMaps = [TLSRecordMap(), TLSRecordMap()]
            embedded.connection.onTLSFailure = { [unowned self] side, error in failures.append((side, "\(error)")) }
        }
    }

    @Test("an unclean end with no TCP FIN before it (the socket was reset) is passed on as a reset, and is no TLS failure")
    func resetIsNotATLSFailure() throws {
        let tls = try TLSConnection()
        try tls.embedded.send("hello", from: .server)
        tls.embedded.connection.legFailed(.client, error: NIOSSLError.uncleanShutdown)
        #expect(tls.failures.isEmpty, "\(tls.failures)")
        let events = tls.embedded.wire(.server).events.map(\.event)
        #expect(events.contains(.close) && !events.contains(.fin), "the reset passed on: \(events)")
    }

    @Test("a TCP FIN with no close_notify before it is a TLS failure of that side's (a truncation)")
    func finWithoutCloseNotifyIsATLSFailure() throws {
        let tls = try TLSConnection()
        tls.embedded.connection.recordMaps[Side.client.slot]?.receivedTCPFIN = true
        tls.embedded.connection.legFailed(.client, error: NIOSSLError.uncleanShutdown)
        #expect(tls.failures.count == 1 && tls.failures.first?.0 == .client, "\(tls.failures)")
    }
}
