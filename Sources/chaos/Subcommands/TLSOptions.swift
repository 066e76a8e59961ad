import ArgumentParser
import ChaosCore
import Foundation

/// `chaos proxy`'s TLS flags: the `tls:` block of the `--listen` proxy, as a scenario would write it.
struct TLSOptions: ParsableArguments {
    @Flag(help: "Terminate TLS from clients with a leaf signed by chaos's CA and open TLS to the upstream (tls: on the proxy).")
    var tls = false

    @Option(help: "How the upstream is reached: verify (system roots), insecure, cleartext or a PEM file of roots (implies --tls).")
    var tlsUpstream: String?

    @Option(help: "The leaf's name when a client sends no SNI (default: the upstream host; implies --tls).")
    var tlsServerName: String?

    @Option(help: "ALPN: mirror (the client's offer upstream, the upstream's choice back) or a list like h2,http/1.1 (implies --tls).")
    var tlsAlpn: String?

    @Option(help: "A team CA's certificate to sign leaves with (with --tls-ca-key; default: chaos's own under $CHAOS_HOME).")
    var tlsCaCert: String?

    @Option(help: "The team CA's private key (PEM).")
    var tlsCaKey: String?

    @Option(help: "A client certificate for an upstream that asks for one (mTLS; with --tls-client-key).")
    var tlsClientCert: String?

    @Option(help: "The client certificate's private key (PEM).")
    var tlsClientKey: String?

    /// Whether any TLS flag was given.
    var given: Bool {
        tls || tlsUpstream != nil || tlsServerName != nil || tlsAlpn != nil || tlsCaCert != nil || tlsClientCert != nil
    }

    func validate() throws {
        guard (tlsCaCert == nil) == (tlsCaKey == nil) else { throw ValidationError("--tls-ca-cert and --tls-ca-key go together") }
        guard (tlsClientCert == nil) == (tlsClientKey == nil) else {
            throw ValidationError("--tls-client-cert and --tls-client-key go together")
        }
    }

    /// The block the flags describe (nil: no TLS flag), checked as a scenario's would be (files readable, names valid).
    func spec() throws -> TLSSpec? {
        guard given else { return nil }
        var block: [String: Any] = [:]
        if let tlsUpstream { block["upstream"] = tlsUpstream }
        if let tlsServerName { block["server_name"] = tlsServerName }
        if let tlsAlpn {
            block["alpn"] = tlsAlpn == "mirror" ? "mirror" as Any : tlsAlpn.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        }
        if let tlsCaCert, let tlsCaKey { block["ca"] = ["cert": tlsCaCert, "key": tlsCaKey] }
        if let tlsClientCert, let tlsClientKey { block["client_cert"] = ["cert": tlsClientCert, "key": tlsClientKey] }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: block, options: [.sortedKeys]), as: UTF8.self)
        do {
            return try TLSSpec.parse(text, source: "--tls flags")
        } catch var error as ChaosError {
            // The block is made from flags: name the flag, not a place in text the user never wrote.
            error.location = nil
            error.message = Self.flagNames.reduce(error.message) { $0.replacingOccurrences(of: $1.key, with: $1.flag) }
            throw error
        }
    }

    /// The scenario's keys and the flags that set them, the longest keys first.
    private static let flagNames: [(key: String, flag: String)] = [
        ("tls.client_cert.cert", "--tls-client-cert"), ("tls.client_cert.key", "--tls-client-key"), ("tls.client_cert", "--tls-client-cert"),
        ("tls.ca.cert", "--tls-ca-cert"), ("tls.ca.key", "--tls-ca-key"), ("tls.ca", "--tls-ca-cert"),
        ("tls.server_name", "--tls-server-name"), ("tls.upstream", "--tls-upstream"), ("tls.alpn", "--tls-alpn"),
    ]
}
