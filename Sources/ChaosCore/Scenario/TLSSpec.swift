/// A proxy's `tls:` block: chaos accepts TLS from the client with a leaf certificate for the client's SNI (or
/// `server_name`) signed by its CA, and opens TLS to the upstream (PRODUCT.md section 9).
package struct TLSSpec: Sendable, Codable, Equatable {
    /// A certificate and its private key, PEM files (absolute once read from a scenario).
    package struct KeyPair: Sendable, Codable, Equatable {
        /// The certificate (chain) file.
        package var cert: String
        /// The private key file.
        package var key: String

        /// A key pair.
        package init(cert: String, key: String) {
            self.cert = cert
            self.key = key
        }
    }

    /// How the upstream's certificate is checked, or whether the upstream speaks TLS at all.
    package enum Upstream: Sendable, Codable, Equatable {
        /// Verified against the system's roots and the upstream's name.
        case verify
        /// Not verified (a test server with a self-made certificate).
        case insecure
        /// Verified against the roots in this PEM file.
        case roots(String)
        /// No TLS upstream: chaos terminates TLS and speaks cleartext (a local server without TLS).
        case cleartext
    }

    /// The CA that signs the leaves: nil is `auto`, chaos's own under `$CHAOS_HOME` (made on first use).
    package var ca: KeyPair?
    /// The leaf's name when the client sends no SNI (default: the upstream host).
    package var serverName: String?
    /// How the upstream is reached.
    package var upstream: Upstream
    /// A client certificate for an upstream that asks for one (mTLS).
    package var clientCert: KeyPair?
    /// The ALPN protocols offered and answered; nil is `mirror` (offer the client's list upstream, answer the client
    /// with what the upstream chose).
    package var alpn: [String]?

    /// A TLS block; the defaults are PRODUCT.md's (`ca: auto`, `upstream: verify`, `alpn: mirror`).
    package init(
        ca: KeyPair? = nil,
        serverName: String? = nil,
        upstream: Upstream = .verify,
        clientCert: KeyPair? = nil,
        alpn: [String]? = nil
    ) {
        self.ca = ca
        self.serverName = serverName
        self.upstream = upstream
        self.clientCert = clientCert
        self.alpn = alpn
    }

    /// How the reason of a connection refused because of TLS begins (a client that rejected chaos's certificate, an
    /// upstream whose certificate failed): the audit reports such a refusal as a `tls` event.
    package static let refusalPrefix = "tls: "

    /// The longest ALPN protocol name (RFC 7301: one length byte).
    package static let longestProtocolName = 255
}

extension TLSSpec {
    /// The rules a `tls:` block obeys however it arrived (a scenario, the control API, a run folder).
    package func checkInvariants(_ field: String, _ bad: (String) -> ChaosError) throws {
        if let serverName, !Self.isServerName(serverName) {
            throw bad("\(field).server_name must be a host name or an IP address, found '\(serverName)'")
        }
        for name in alpn ?? [] where name.isEmpty || name.utf8.count > Self.longestProtocolName {
            throw bad("\(field).alpn: a protocol name is 1 to 255 bytes, found '\(name.prefix(40))'")
        }
        if alpn?.isEmpty == true { throw bad("\(field).alpn needs at least one protocol, or mirror") }
        if case .cleartext = upstream, clientCert != nil {
            throw bad("\(field).client_cert is for a TLS upstream; upstream is cleartext")
        }
    }

    /// Whether `name` can be a certificate's name: a DNS name (labels of letters, digits, '-', '_', a leading '*'),
    /// an IPv4 or an IPv6 address.
    package static func isServerName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 253, name.unicodeScalars.allSatisfy(\.isASCII) else { return false }
        if name.contains(":") { return name.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." } }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && label.allSatisfy { $0.isLetter || $0.isNumber || "-_*".contains($0) }
        }
    }
}
