import ChaosCore
import NIOSSL

/// The reference client's TLS (`chaos demo client --tls`): the roots it trusts (chaos's CA, as a phone app under test
/// trusts it) and the name it asks for and verifies.
package struct DemoClientTLS: Sendable {
    /// A PEM file of the roots the client trusts.
    package var trustRoots: String
    /// The SNI name sent and checked against the server's certificate.
    package var serverName: String

    /// A client TLS setting.
    package init(trustRoots: String, serverName: String) {
        self.trustRoots = trustRoots
        self.serverName = serverName
    }

    /// A context offering `alpn` (none for NDJSON lines).
    func context(alpn: [String]) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(trustRoots)
        configuration.applicationProtocols = alpn
        return try NIOSSLContext(configuration: configuration)
    }
}

/// The reference server's TLS (`chaos demo server --tls-cert`): its own certificate, as a staging server has.
package struct DemoServerTLS: Sendable {
    /// A PEM file of the certificate chain.
    package var certificate: String
    /// A PEM file holding the private key (may be the same file as the chain).
    package var key: String

    /// A server TLS setting.
    package init(certificate: String, key: String) {
        self.certificate = certificate
        self.key = key
    }

    /// A context answering `alpn` (none for NDJSON lines); bad files are a `badInput` error.
    func context(alpn: [String]) throws -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
            let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
            configuration.applicationProtocols = alpn
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ChaosError.badInput("--tls-cert \(certificate) / --tls-key \(key): cannot make a TLS server of them (\(error))")
        }
    }
}
