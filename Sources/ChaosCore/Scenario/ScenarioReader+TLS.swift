import Foundation

extension ScenarioReader {
    /// A proxy's `tls:` block; files are relative to the scenario's folder and must be readable now.
    func tls(_ value: YAMLValue, _ what: String) throws -> TLSSpec {
        let map = try value.mapping(what, allowed: ["ca", "server_name", "upstream", "client_cert", "alpn"])
        var spec = TLSSpec()
        if let ca = map["ca"] {
            if ca.isScalar {
                let text = try ca.string("\(what).ca")
                guard text == "auto" else { throw ca.error("\(what).ca must be auto or {cert: FILE, key: FILE}, found '\(text)'") }
            } else {
                spec.ca = try keyPair(ca, "\(what).ca")
            }
        }
        if let name = map["server_name"] {
            let text = try name.string("\(what).server_name")
            guard TLSSpec.isServerName(text) else {
                throw name.error("\(what).server_name must be a host name or an IP address, found '\(text)'")
            }
            spec.serverName = text
        }
        if let upstream = map["upstream"] {
            let text = try upstream.string("\(what).upstream")
            switch text {
            case "verify": spec.upstream = .verify
            case "insecure": spec.upstream = .insecure
            case "cleartext": spec.upstream = .cleartext
            default:
                spec.upstream = .roots(try readableFile(upstream, "\(what).upstream", expected: "verify, insecure, cleartext or a PEM file of roots"))
            }
        }
        if let client = map["client_cert"] {
            if case .cleartext = spec.upstream { throw client.error("\(what).client_cert is for a TLS upstream; upstream is cleartext") }
            spec.clientCert = try keyPair(client, "\(what).client_cert")
        }
        if let alpn = map["alpn"] {
            if alpn.isScalar {
                let text = try alpn.string("\(what).alpn")
                guard text == "mirror" else { throw alpn.error("\(what).alpn must be mirror or a list like [h2, http/1.1], found '\(text)'") }
            } else {
                let items = try alpn.sequence("\(what).alpn")
                guard !items.isEmpty else { throw alpn.error("\(what).alpn needs at least one protocol, or mirror") }
                spec.alpn = try items.map { item in
                    let name = try item.string("\(what).alpn")
                    guard !name.isEmpty, name.utf8.count <= TLSSpec.longestProtocolName else {
                        throw item.error("\(what).alpn: a protocol name is 1 to 255 bytes, found '\(name.prefix(40))'")
                    }
                    return name
                }
            }
        }
        return spec
    }

    /// `{cert: FILE, key: FILE}`, both readable.
    private func keyPair(_ value: YAMLValue, _ what: String) throws -> TLSSpec.KeyPair {
        let map = try value.mapping(what, allowed: ["cert", "key"])
        return TLSSpec.KeyPair(
            cert: try readableFile(try map.required("cert"), "\(what).cert", expected: "a PEM file"),
            key: try readableFile(try map.required("key"), "\(what).key", expected: "a PEM file")
        )
    }

    /// A file named relative to the scenario's folder, absolute, that can be read now.
    private func readableFile(_ value: YAMLValue, _ what: String, expected: String) throws -> String {
        let given = try value.string(what)
        let path =
            given.hasPrefix("/")
            ? given
            : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(given).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            FileManager.default.isReadableFile(atPath: path)
        else {
            throw value.error("\(what) must be \(expected); cannot read '\(given)'")
        }
        return path
    }
}
