package import ChaosCore
package import NIOSSL
import Synchronization

/// One proxy's TLS: the leaf shown to each client (by its SNI), the TLS contexts of both legs (made once per SNI
/// and ALPN answer, and per ALPN offer), the upstream's verification and client certificate, and the key log both
/// legs write to. Built from the proxy's `tls:` block; the relay asks it for each connection.
package final class TLSInterceptor: Sendable {
    /// The `tls:` block.
    package let spec: TLSSpec
    /// The CA that signs the leaves.
    package let authority: CertificateAuthority
    private let issuer: LeafIssuer
    private let upstreamHost: String
    private let keyLog: NIOSSLKeyLogCallback?
    private let clientCertificate: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)?
    private let serverContexts = Mutex<[String: NIOSSLContext]>([:])
    private let clientContexts = Mutex<[[String]: NIOSSLContext]>([:])

    /// The most contexts kept per leg (distinct SNI and ALPN pairs); past it, contexts are made per connection.
    static let contextCapacity = 1024

    /// The TLS of a proxy whose upstream is `upstreamHost`; `keyLog` receives NSS key log lines of both legs.
    /// Throws `badInput` naming the file for a CA, roots or client certificate that does not load.
    package init(
        spec: TLSSpec,
        upstreamHost: String,
        keyLog: NIOSSLKeyLogCallback? = nil,
        authority: CertificateAuthority? = nil
    ) throws {
        self.spec = spec
        self.authority = try authority ?? spec.ca.map(CertificateAuthority.load) ?? CertificateAuthority.own()
        issuer = try LeafIssuer(authority: self.authority)
        self.upstreamHost = upstreamHost
        self.keyLog = keyLog
        if let pair = spec.clientCert {
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(pair.cert)
                let key = try NIOSSLPrivateKey(file: pair.key, format: .pem)
                clientCertificate = (chain, key)
            } catch {
                throw ChaosError.badInput("tls.client_cert: '\(pair.cert)' / '\(pair.key)' do not load as a PEM certificate and key (\(error))")
            }
            // A key that is not the certificate's fails here rather than at the first upstream handshake.
            _ = try clientContext(offering: [])
        } else {
            clientCertificate = nil
        }
        if case .roots(let file) = spec.upstream {
            do { _ = try NIOSSLCertificate.fromPEMFile(file) } catch {
                throw ChaosError.badInput("tls.upstream: '\(file)' is not a PEM file of certificates (\(error))")
            }
        }
    }

    /// Whether the upstream leg speaks TLS.
    package var upstreamIsTLS: Bool { spec.upstream != .cleartext }

    /// The name of the leaf for a client that asked for `hello`'s SNI (else `server_name`, else the upstream host).
    package func serverName(for hello: ClientHello) -> String {
        if let name = hello.serverName, TLSSpec.isServerName(name) { return name }
        return spec.serverName ?? upstreamHost
    }

    /// The protocols offered upstream for a client that offered `hello`'s.
    package func upstreamOffer(for hello: ClientHello) -> [String] { spec.alpn ?? hello.protocols }

    /// The protocols to answer the client with, once the upstream chose `negotiated` (nil: it chose none, or
    /// it speaks cleartext).
    package func clientAnswer(for hello: ClientHello, negotiated: String?) -> [String] {
        if let fixed = spec.alpn { return fixed }
        if let negotiated { return [negotiated] }
        // Cleartext upstream: the client's first choice (h2 for a gRPC client, to an h2c server).
        return upstreamIsTLS ? [] : Array(hello.protocols.prefix(1))
    }

    /// Whether leaves copy the upstream certificate's other names: only when the upstream was verified (`verify` or a
    /// roots file), so that no name chaos did not check reaches a client.
    package var copiesUpstreamNames: Bool {
        switch spec.upstream {
        case .verify, .roots: true
        case .insecure, .cleartext: false
        }
    }

    /// The context that answers a client as `name` with `protocols`, its leaf also naming `upstreamNames` (the
    /// verified upstream certificate's subject alternative names).
    package func serverContext(name: String, protocols: [String], upstreamNames: [String] = []) throws -> NIOSSLContext {
        let key = ([name.lowercased()] + protocols + ["\u{1}"] + upstreamNames).joined(separator: "\u{0}")
        if let context = serverContexts.withLock({ $0[key] }) { return context }
        let leaf = try issuer.leaf(for: name, alsoNaming: upstreamNames)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: leaf.chain.map { .certificate($0) },
            privateKey: .privateKey(leaf.key)
        )
        configuration.applicationProtocols = protocols
        configuration.keyLogCallback = keyLog
        let context = try NIOSSLContext(configuration: configuration)
        serverContexts.withLock { if $0.count < Self.contextCapacity { $0[key] = context } }
        return context
    }

    /// The context that dials the upstream offering `protocols`; nil for a cleartext upstream.
    package func clientContext(offering protocols: [String]) throws -> NIOSSLContext? {
        guard upstreamIsTLS else { return nil }
        if let context = clientContexts.withLock({ $0[protocols] }) { return context }
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch spec.upstream {
        case .verify, .cleartext: break
        case .insecure: configuration.certificateVerification = .none
        case .roots(let file): configuration.trustRoots = .file(file)
        }
        if let clientCertificate {
            configuration.certificateChain = clientCertificate.chain.map { .certificate($0) }
            configuration.privateKey = .privateKey(clientCertificate.key)
        }
        configuration.applicationProtocols = protocols
        configuration.keyLogCallback = keyLog
        let context: NIOSSLContext
        do { context = try NIOSSLContext(configuration: configuration) } catch {
            throw ChaosError.badInput(
                "tls: the upstream's TLS settings do not load (client_cert key not the certificate's, "
                    + "or an unreadable roots file): \(error)"
            )
        }
        clientContexts.withLock { if $0.count < Self.contextCapacity { $0[protocols] = context } }
        return context
    }

    /// The name the upstream's certificate is checked against (and sent as its SNI): the client's SNI, else
    /// `server_name`, else the upstream host; nil for an IP address (no SNI is sent for one).
    package func upstreamServerName(for hello: ClientHello) -> String? {
        let name = hello.serverName.flatMap { TLSSpec.isServerName($0) ? $0 : nil } ?? spec.serverName ?? upstreamHost
        return LeafIssuer.addressBytes(name) == nil ? name : nil
    }
}
