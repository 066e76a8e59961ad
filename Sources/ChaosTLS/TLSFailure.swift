import Foundation

/// A TLS error as a person reads it in a report: BoringSSL's reason codes (`CERTIFICATE_VERIFY_FAILED`,
/// `TLSV1_ALERT_UNKNOWN_CA`), not the error's whole description with its source paths.
package enum TLSFailure {
    /// The reason codes in `error`'s description, each once, in order; the description itself (cut to 200
    /// characters) when it has none.
    package static func describe(_ error: any Error) -> String {
        let text = "\(error)"
        var codes: [String] = []
        var rest = Substring(text)
        while let range = rest.range(of: "OPENSSL_internal:") {
            let code = rest[range.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
            if !code.isEmpty, !codes.contains(String(code)) { codes.append(String(code)) }
            rest = rest[range.upperBound...]
        }
        return codes.isEmpty ? String(text.prefix(200)) : codes.joined(separator: ", ")
    }
}
