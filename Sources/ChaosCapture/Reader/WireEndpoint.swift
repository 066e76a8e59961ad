/// An address and port as decoded from a packet, compact and cheap to hash.
struct WireEndpoint: Hashable, Comparable {
    /// The first 8 address bytes (IPv6) or 0 (IPv4).
    var high: UInt64
    /// The last 8 address bytes (IPv6) or the 4 IPv4 bytes.
    var low: UInt64
    var isIPv6: Bool
    var port: UInt16

    /// Whether both are the same host (ports aside): the same address, or two loopback addresses (Linux answers for the
    /// whole of 127.0.0.0/8 on its loopback interface, so a proxy that a handoff moved to a new loopback address, as
    /// chaos's `new_address` does in a run on one machine, dials from the host its clients connected to).
    func sameHost(as other: WireEndpoint) -> Bool {
        (high == other.high && low == other.low && isIPv6 == other.isIPv6) || (isLoopback && other.isLoopback)
    }

    /// Whether the address is a loopback one: 127.0.0.0/8, ::1, or 127.0.0.0/8 mapped into IPv6.
    var isLoopback: Bool {
        guard isIPv6 else { return low >> 24 == 127 }
        return high == 0 && (low == 1 || (low >> 32 == 0xFFFF && (low >> 24) & 0xFF == 127))
    }

    static func < (lhs: WireEndpoint, rhs: WireEndpoint) -> Bool {
        (lhs.isIPv6 ? 1 : 0, lhs.high, lhs.low, lhs.port) < (rhs.isIPv6 ? 1 : 0, rhs.high, rhs.low, rhs.port)
    }

    /// `a.b.c.d:port` or `[v6]:port`.
    var text: String {
        var bytes: [UInt8] = []
        if isIPv6 {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: high >> UInt64(shift))) }
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
        } else {
            for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
        }
        return IPEndpoint(address: bytes, port: port).description
    }
}

/// The two ends of a TCP flow, in a fixed order so both directions find the same flow.
struct FlowKey: Hashable {
    var lower: WireEndpoint
    var upper: WireEndpoint

    init(_ one: WireEndpoint, _ other: WireEndpoint) {
        if one < other {
            lower = one
            upper = other
        } else {
            lower = other
            upper = one
        }
    }
}
