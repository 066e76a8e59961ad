import Foundation

/// An IPv4 or IPv6 address and a TCP port, as written into and read from capture packets.
struct IPEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// The address bytes: 4 for IPv4, 16 for IPv6.
    var address: [UInt8]
    /// The TCP port.
    var port: UInt16

    var isIPv6: Bool { address.count == 16 }

    /// `a.b.c.d:port` or `[v6]:port`, the form `ConnectionEndpoints` uses.
    var description: String {
        isIPv6 ? "[\(Self.format(address))]:\(port)" : "\(Self.format(address)):\(port)"
    }

    /// The address as text (no port).
    static func format(_ address: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = address.count == 16 ? AF_INET6 : AF_INET
        let ok = address.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil
        }
        guard ok else { return address.map(String.init).joined(separator: ".") }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Parses `host:port` or `[v6]:port`. A host that is not an IP literal (`localhost`, a DNS
    /// name) gets a stable made-up address: `localhost` is 127.0.0.1, anything else a 10.x.y.z
    /// derived from the name, so a capture still has consistent conversations.
    static func parse(_ text: String) -> IPEndpoint {
        var host = Substring(text)
        var port: UInt16 = 0
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if rest.hasPrefix(":") { port = UInt16(rest.dropFirst()) ?? 0 }
        } else if let colon = host.lastIndex(of: ":"), host.firstIndex(of: ":") == colon {
            port = UInt16(host[host.index(after: colon)...]) ?? 0
            host = host[..<colon]
        }
        return IPEndpoint(address: addressBytes(String(host)), port: port)
    }

    private static func addressBytes(_ host: String) -> [UInt8] {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        if host == "localhost" || host.isEmpty { return [127, 0, 0, 1] }
        var hash: UInt32 = 2_166_136_261
        for byte in host.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return [
            10, UInt8(truncatingIfNeeded: hash >> 16), UInt8(truncatingIfNeeded: hash >> 8),
            UInt8(truncatingIfNeeded: hash | 1),
        ]
    }

    /// The same endpoint with its address widened to IPv6 (IPv4-mapped) when `toIPv6` is set.
    func widened(toIPv6: Bool) -> IPEndpoint {
        guard toIPv6, !isIPv6 else { return self }
        return IPEndpoint(address: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + address, port: port)
    }
}
