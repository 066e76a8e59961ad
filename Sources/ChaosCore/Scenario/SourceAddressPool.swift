import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The local addresses a handoff's `new_address` moves the proxy's upstream connections to, one after another (so
/// the server sees the client's address change, as after a real WiFi → LTE switch).
package enum SourceAddressPool {
    /// 127.0.0.2 … 127.0.0.9: loopback addresses every Linux machine has (the whole 127/8 is local).
    package static let loopback = (2...9).map { "127.0.0.\($0)" }
    /// The most addresses a pool may name (a range is spelled out).
    package static let largest = 4096

    /// `true` (the loopback pool), `false` (none), `A-B` (an IPv4 range), one address, or a list of addresses; each
    /// must be bindable on this machine. Errors point at the value.
    static func parse(_ value: YAMLValue, what: String) throws -> [String]? {
        if value.isScalar, let flag = try? value.bool(what) { return flag ? loopback : nil }
        let addresses: [(String, YAMLValue)]
        if value.isScalar {
            let text = try value.string(what)
            if let range = Self.range(text) {
                addresses = range.map { ($0, value) }
            } else {
                addresses = [(text, value)]
            }
        } else {
            addresses = try value.sequence(what).map { (try $0.string(what), $0) }
        }
        guard !addresses.isEmpty else {
            throw value.error("\(what) must name at least one local address (true for \(loopback.first!)-\(loopback.last!)), found an empty pool")
        }
        guard addresses.count <= largest else { throw value.error("\(what) names \(addresses.count) addresses; at most \(largest)") }
        for (address, at) in addresses {
            guard isIPAddress(address) else {
                throw at.error("\(what) must be true, an address range like 127.0.0.2-127.0.0.9, or IP addresses, found '\(address)'")
            }
            if let problem = bindProblem(address) {
                throw at.error("\(what): cannot bind \(address) on this machine (\(problem)); name addresses it has")
            }
        }
        return addresses.map(\.0)
    }

    /// The pool as written back: `A-B` for a run of IPv4 addresses in one /24, else the addresses with commas.
    package static func describe(_ pool: [String]) -> String {
        if pool.count > 2, let first = pool.first, let last = pool.last, range("\(first)-\(last)") == pool { return "\(first)-\(last)" }
        return pool.joined(separator: ",")
    }

    /// Whether `text` is an IPv4 or IPv6 address.
    package static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// `A-B` between two IPv4 addresses that share their first three parts (at most 256), in order; nil otherwise.
    static func range(_ text: String) -> [String]? {
        let ends = text.split(separator: "-").map { $0.trimmingCharacters(in: .whitespaces) }
        guard ends.count == 2, isIPAddress(ends[0]), isIPAddress(ends[1]) else { return nil }
        let low = ends[0].split(separator: ".")
        let high = ends[1].split(separator: ".")
        guard low.count == 4, high.count == 4, low.prefix(3) == high.prefix(3), let first = Int(low[3]), let last = Int(high[3]),
            first <= last
        else { return nil }
        return (first...last).map { "\(low.prefix(3).joined(separator: ".")).\($0)" }
    }

    /// Why `address` cannot be bound here (nil: it can): a socket bound to it on port 0, then closed.
    package static func bindProblem(_ address: String) -> String? {
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        let isV4 = inet_pton(AF_INET, address, &v4.sin_addr) == 1
        guard isV4 || inet_pton(AF_INET6, address, &v6.sin6_addr) == 1 else { return "not an IP address" }
        let fd = socket(isV4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        let status: Int32
        if isV4 {
            v4.sin_family = sa_family_t(AF_INET)
            status = withUnsafePointer(to: &v4) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        } else {
            v6.sin6_family = sa_family_t(AF_INET6)
            status = withUnsafePointer(to: &v6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        return status == 0 ? nil : String(cString: strerror(errno))
    }
}
