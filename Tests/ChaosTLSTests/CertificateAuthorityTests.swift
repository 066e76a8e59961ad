import ChaosCore
import Foundation
import NIOCore
import NIOEmbedded
import NIOSSL
import NIOTLS
import Testing

@testable import ChaosTLS

@Suite("chaos's CA and its leaves", .timeLimit(.minutes(5)))
struct CertificateAuthorityTests {
    static func home() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("chaos-home-\(UUID().uuidString)").path
    }

    @Test("made on first use with its key 0600, then the same CA every time (same fingerprint)")
    func madeOnce() throws {
        let home = Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let first = try CertificateAuthority.own(home: home)
        let mode = try FileManager.default.attributesOfItem(atPath: home + "/ca-key.pem")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let again = try CertificateAuthority.own(home: home)
        #expect(first.fingerprint == again.fingerprint && first.fingerprint.count == 95)
        #expect(first.pem.hasPrefix("-----BEGIN CERTIFICATE-----"))
    }

    @Test("a team CA whose key is not its certificate's, or a certificate that is no CA, is bad input naming the file")
    func badTeamCA() throws {
        let (one, two) = (Self.home(), Self.home())
        defer { for home in [one, two] { try? FileManager.default.removeItem(atPath: home) } }
        _ = try CertificateAuthority.own(home: one)
        _ = try CertificateAuthority.own(home: two)
        let mismatched = #expect(throws: ChaosError.self) {
            try CertificateAuthority.load(TLSSpec.KeyPair(cert: one + "/ca.pem", key: two + "/ca-key.pem"))
        }
        #expect(mismatched?.message.contains("is not the key of the certificate") == true, "\(mismatched?.message ?? "")")
        let notPEM = #expect(throws: ChaosError.self) {
            try CertificateAuthority.load(TLSSpec.KeyPair(cert: one + "/ca-key.pem", key: one + "/ca-key.pem"))
        }
        #expect(notPEM?.message.contains("is not a PEM certificate") == true)
    }

    @Test(
        "a leaf per name (DNS or IP), cached, and names no certificate can carry are refused",
        arguments: ["", "a b", String(repeating: "a", count: 254), "bücher.example", "x..y", "-\u{0}-"]
    )
    func leafNames(bad: String) throws {
        let home = Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let issuer = try LeafIssuer(authority: try CertificateAuthority.own(home: home))
        let leaf = try issuer.leaf(for: "api.example.test")
        #expect(leaf.chain.count == 2)
        #expect(try issuer.leaf(for: "API.example.test").chain[0] == leaf.chain[0])
        #expect(try issuer.leaf(for: "127.0.0.1").chain.count == 2)
        #expect(try issuer.leaf(for: "::1").chain.count == 2)
        #expect(throws: ChaosError.self) { try issuer.leaf(for: bad) }
    }

    @Test("a leaf copies the upstream's other names (DNS, wildcard, IPv4, IPv6) after its own, skipping repeats and names no certificate can carry")
    func leafCopiesUpstreamNames() throws {
        let home = Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let issuer = try LeafIssuer(authority: try CertificateAuthority.own(home: home))
        let upstream = ["API.example.test", "www.example.test", "*.example.test", "127.0.0.1", "::1", "a b", "*.", "www.example.test"]
        let leaf = try issuer.leaf(for: "api.example.test", alsoNaming: upstream)
        #expect(LeafIssuer.alternativeNames(of: leaf.chain[0]) == ["api.example.test", "www.example.test", "*.example.test", "127.0.0.1", "::1"])
        // Another set of upstream names is another leaf; the same set is the cached one.
        #expect(try issuer.leaf(for: "api.example.test").chain[0] != leaf.chain[0])
        #expect(try issuer.leaf(for: "api.example.test", alsoNaming: upstream).chain[0] == leaf.chain[0])
        #expect(LeafIssuer.alternativeNames(of: try issuer.leaf(for: "api.example.test").chain[0]) == ["api.example.test"])
        let many = (0..<300).map { "n\($0).example.test" }
        #expect(LeafIssuer.alternativeNames(of: try issuer.leaf(for: "x.test", alsoNaming: many).chain[0]).count == LeafIssuer.copiedNamesLimit + 1)
    }

    @Test("a client that trusts the CA completes a handshake with the leaf for its SNI, ALPN answered as asked")
    func handshake() throws {
        let home = Self.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let authority = try CertificateAuthority.own(home: home)
        let interceptor = try TLSInterceptor(spec: TLSSpec(upstream: .insecure), upstreamHost: "127.0.0.1", authority: authority)
        let serverContext = try interceptor.serverContext(name: "api.example.test", protocols: ["h2"])
        var client = TLSConfiguration.makeClientConfiguration()
        client.trustRoots = .certificates([try NIOSSLCertificate(bytes: authority.derBytes, format: .der)])
        client.applicationProtocols = ["h2", "http/1.1"]
        let clientContext = try NIOSSLContext(configuration: client)
        let (negotiated, error) = try TLSPair.handshake(
            client: NIOSSLClientHandler(context: clientContext, serverHostname: "api.example.test"),
            server: NIOSSLServerHandler(context: serverContext)
        )
        #expect(error == nil, "\(String(describing: error))")
        #expect(negotiated == "h2")
        // The same client asking for another name does not accept the leaf.
        let (_, wrongName) = try TLSPair.handshake(
            client: NIOSSLClientHandler(context: clientContext, serverHostname: "other.example.test"),
            server: NIOSSLServerHandler(context: serverContext)
        )
        #expect(wrongName != nil)
    }
}

/// Two embedded channels whose bytes are carried across until both sides stop writing.
enum TLSPair {
    final class Watch: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var negotiated: String??
        var error: (any Error)?
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted(let protocolName) = event { negotiated = .some(protocolName) }
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { self.error = error }
    }

    /// The client's negotiated protocol (nil: none) and the first error either side saw.
    static func handshake(client: NIOSSLClientHandler, server: NIOSSLServerHandler) throws -> (String?, (any Error)?) {
        let (clientWatch, serverWatch) = (Watch(), Watch())
        let a = EmbeddedChannel(handlers: [client, clientWatch])
        let b = EmbeddedChannel(handlers: [server, serverWatch])
        a.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1), promise: nil)
        b.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1), promise: nil)
        for _ in 0..<20 {
            var moved = false
            while let bytes = try a.readOutbound(as: ByteBuffer.self) {
                moved = true
                _ = try? b.writeInbound(bytes)
            }
            while let bytes = try b.readOutbound(as: ByteBuffer.self) {
                moved = true
                _ = try? a.writeInbound(bytes)
            }
            if !moved { break }
        }
        // Not finished: a TLS close waits for the peer's close_notify on a timer this loop never runs.
        return (
            clientWatch.negotiated ?? nil,
            clientWatch.error ?? serverWatch.error ?? (clientWatch.negotiated == nil ? ChannelError.ioOnClosedChannel : nil)
        )
    }
}
