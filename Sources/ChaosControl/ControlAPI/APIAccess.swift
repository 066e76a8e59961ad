import ChaosCore
import Foundation

/// Who may use the control API. Bound to loopback it is open, as Toxiproxy's is (test code on the same machine).
/// Bound anywhere else it serves the live audit (message payloads in `/report`, `/events`) and injects faults, so it
/// requires `Authorization: Bearer TOKEN`: a request without it, or with another token, gets 401 and nothing else.
/// The token is compared in constant time and never logged; `metricsOpen` leaves `GET /metrics` (figures only) open
/// for a Prometheus scraper.
package struct APIAccess: Sendable {
    /// The bearer token's bytes; nil: open.
    let token: [UInt8]?
    /// Whether `GET /metrics` is answered without the token.
    package let metricsOpen: Bool

    /// Open to anyone who can reach it (loopback).
    package static let open = APIAccess(token: nil, metricsOpen: true)

    init(token: [UInt8]?, metricsOpen: Bool) {
        self.token = token
        self.metricsOpen = metricsOpen
    }

    /// Requires the token read from `tokenFile` (its surrounding whitespace, such as a final newline, is not part of
    /// it). An unreadable or empty file, or one under 16 bytes, is bad input naming it.
    package init(tokenFile: String, metricsOpen: Bool) throws {
        guard let data = FileManager.default.contents(atPath: tokenFile) else {
            throw ChaosError.badInput("--api-token-file \(tokenFile): cannot read it")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.utf8.count >= 16, !text.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw ChaosError.badInput(
                "--api-token-file \(tokenFile): the token must be one word of at least 16 characters "
                    + "(found \(text.utf8.count) characters\(text.contains(where: \.isWhitespace) ? " with spaces inside" : ""))"
            )
        }
        self.init(token: Array(text.utf8), metricsOpen: metricsOpen)
    }

    /// Whether `host` is a loopback address (`127.x.x.x`, `::1`, `localhost`): there the API may be open.
    package static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return bare == "localhost" || bare == "::1" || bare.hasPrefix("127.")
    }

    /// Whether a request for `path` with this `Authorization` header value may be answered. The live page itself
    /// (`GET /ui`, static, the same for everyone) is answered without the token: a browser cannot send a header with a
    /// page it opens; the page then asks for its figures and controls with the token it is given (`/ui#token=…`).
    func admits(path: String, authorization: String?) -> Bool {
        guard let token else { return true }
        if metricsOpen, path == "/metrics" { return true }
        if path == "/ui" { return true }
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        return Self.constantTimeEqual(Array(authorization.utf8.dropFirst("Bearer ".utf8.count)), token)
    }

    /// Compares every byte whatever the first difference (the time says nothing of how much of a guess was right).
    static func constantTimeEqual(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: given.count ^ expected.count)
        for index in 0..<expected.count {
            difference |= expected[index] ^ (index < given.count ? given[index] : 0)
        }
        return difference == 0
    }
}
