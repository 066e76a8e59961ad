import ChaosCore

/// A `HOST:PORT` pair as the demo flags take it (`127.0.0.1:7001`, `localhost:0`, `[::1]:7001`).
package struct DemoAddress: Hashable, Sendable, CustomStringConvertible {
    /// The host name or IP literal (without brackets for IPv6).
    package var host: String
    /// The TCP port; 0 asks the system for a free one when listening.
    package var port: Int

    /// An address from its parts.
    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`; throws `ChaosError.badInput` naming what was expected.
    package init(parsing text: String) throws {
        guard let colon = text.lastIndex(of: ":") else {
            throw ChaosError.badInput("expected HOST:PORT, got '\(text)'")
        }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ChaosError.badInput("expected a host before ':' in '\(text)'") }
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw ChaosError.badInput("expected a port between 0 and 65535 in '\(text)', got '\(portText)'")
        }
        self.host = host
        self.port = port
    }

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
