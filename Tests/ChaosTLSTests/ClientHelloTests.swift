import NIOCore
import NIOEmbedded
import NIOSSL
import Testing

@testable import ChaosTLS

@Suite("ClientHello: SNI and ALPN read from a real client's first bytes", .timeLimit(.minutes(5)))
struct ClientHelloTests {
    /// The first bytes a BoringSSL client sends for `name` offering `protocols`.
    static func helloBytes(name: String?, protocols: [String]) throws -> [UInt8] {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = protocols
        let handler = try NIOSSLClientHandler(context: try NIOSSLContext(configuration: configuration), serverHostname: name)
        let channel = EmbeddedChannel(handler: handler)
        _ = try? channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var bytes: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        _ = try? channel.finish()
        return bytes
    }

    @Test("a client's SNI and ALPN list, in its order; whole records consumed")
    func sniAndALPN() throws {
        let bytes = try Self.helloBytes(name: "api.example.test", protocols: ["h2", "http/1.1"])
        guard case .hello(let hello, let consumed) = ClientHello.parse(bytes) else {
            Issue.record("\(ClientHello.parse(bytes))")
            return
        }
        #expect(hello == ClientHello(serverName: "api.example.test", protocols: ["h2", "http/1.1"]))
        #expect(consumed == bytes.count)
        guard case .hello(let bare, _) = ClientHello.parse(try Self.helloBytes(name: nil, protocols: [])) else {
            Issue.record("no hello")
            return
        }
        #expect(bare == ClientHello(serverName: nil, protocols: []))
    }

    @Test("cut anywhere, it needs more; one byte more than it has is never read")
    func cut() throws {
        let bytes = try Self.helloBytes(name: "a.test", protocols: ["x-lines"])
        for end in 0..<bytes.count { #expect(ClientHello.parse(Array(bytes[..<end])) == .incomplete, "cut at \(end)") }
    }

    @Test(
        "bytes that are not a TLS ClientHello say why",
        arguments: [
            (Array("GET / HTTP/1.1\r\n\r\n".utf8), "not a TLS handshake record"),
            ([22, 3, 1, 0, 4, 2, 0, 0, 0], "is not a ClientHello"),
            ([22, 3, 1, 0xff, 0xff], "a handshake record of 65535 bytes"),
            ([22, 3, 1, 0, 6, 1, 0, 0, 2, 3, 3], "does not parse"),
            ([22, 4, 0, 0, 1, 1], "is not TLS"),
        ]
    )
    func notTLS(bytes: [UInt8], reason: String) {
        guard case .notTLS(let why) = ClientHello.parse(bytes) else {
            Issue.record("\(ClientHello.parse(bytes))")
            return
        }
        #expect(why.contains(reason), "\(why)")
    }
}

@Suite("TLS errors as a report shows them")
struct TLSFailureTests {
    struct Described: Error, CustomStringConvertible { let description: String }

    @Test("BoringSSL's reason codes, each once, without source paths; another error as it describes itself")
    func codes() {
        let boring = Described(
            description: "handshakeFailed(sslError([Error: 268435568 error:10000070:SSL routines:OPENSSL_internal:"
                + "BAD_PACKET_LENGTH at /x/ssl_aead_ctx.cc:242, Error: 1 error:1000008b:SSL routines:OPENSSL_internal:"
                + "DECRYPTION_FAILED_OR_BAD_RECORD_MAC at /x/tls_record.cc:190, error:OPENSSL_internal:BAD_PACKET_LENGTH]))"
        )
        #expect(TLSFailure.describe(boring) == "BAD_PACKET_LENGTH, DECRYPTION_FAILED_OR_BAD_RECORD_MAC")
        #expect(TLSFailure.describe(Described(description: "connection reset")) == "connection reset")
    }
}
