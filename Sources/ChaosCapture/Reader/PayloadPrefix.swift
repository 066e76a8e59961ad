/// The first payload bytes a pending flow carried each way, kept (bounded) to tell which client leg
/// a proxy's server leg relays: the proxy forwards bytes unchanged, so a server leg's bytes each way
/// begin with its own client leg's bytes that way, however TCP cut them into segments.
struct PayloadPrefix {
    /// The most bytes kept per direction.
    static let limit = 4096

    /// The first client → server bytes.
    private(set) var towardServer: [UInt8] = []
    /// The first server → client bytes.
    private(set) var towardClient: [UInt8] = []

    /// Keeps what fits of `bytes`, reported in the direction `towardServer`.
    mutating func record(_ bytes: [UInt8], towardServer: Bool) {
        if towardServer {
            Self.append(bytes, to: &self.towardServer)
        } else {
            Self.append(bytes, to: &towardClient)
        }
    }

    /// Whether both directions equal `other`'s over their common length.
    func agrees(with other: PayloadPrefix) -> Bool {
        Self.agree(towardServer, other.towardServer) && Self.agree(towardClient, other.towardClient)
    }

    /// Whether comparing with `other` can tell anything: in some direction both carried bytes. A server leg's greeting
    /// (HTTP/2's SETTINGS) that the proxy has not yet written to any client leg agrees with every one of them.
    func overlaps(_ other: PayloadPrefix) -> Bool {
        (!towardServer.isEmpty && !other.towardServer.isEmpty) || (!towardClient.isEmpty && !other.towardClient.isEmpty)
    }

    /// Whether, in one direction, this prefix and each of `others` are full: more payload cannot tell
    /// them apart.
    func isExhausted(against others: [PayloadPrefix]) -> Bool {
        let full = { (bytes: [UInt8]) in bytes.count >= Self.limit }
        return (full(towardServer) && others.allSatisfy { full($0.towardServer) })
            || (full(towardClient) && others.allSatisfy { full($0.towardClient) })
    }

    private static func append(_ bytes: [UInt8], to kept: inout [UInt8]) {
        let room = limit - kept.count
        guard room > 0 else { return }
        kept += bytes.prefix(room)
    }

    private static func agree(_ one: [UInt8], _ other: [UInt8]) -> Bool {
        let common = min(one.count, other.count)
        return one[..<common] == other[..<common]
    }
}
