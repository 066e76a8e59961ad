/// Which way bytes travel, in Toxiproxy's words: `upstream` is client→server, `downstream` is
/// server→client.
package enum Direction: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// Client to server.
    case upstream
    /// Server to client.
    case downstream

    /// The side that produces bytes travelling this way.
    package var producer: Side { self == .upstream ? .client : .server }
    /// The side that consumes bytes travelling this way.
    package var consumer: Side { self == .upstream ? .server : .client }
    /// The other way.
    package var reversed: Direction { self == .upstream ? .downstream : .upstream }

    package var description: String { rawValue }
}

/// A set of directions a fault applies to: `upstream`, `downstream` or `both`.
package enum DirectionSet: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case upstream
    case downstream
    case both

    /// Whether bytes travelling `direction` are affected.
    package func contains(_ direction: Direction) -> Bool {
        switch self {
        case .both: true
        case .upstream: direction == .upstream
        case .downstream: direction == .downstream
        }
    }

    /// The directions in the set.
    package var directions: [Direction] { Direction.allCases.filter(contains) }

    package var description: String { rawValue }
}

/// One end of a proxied connection as the proxy sees it.
package enum Side: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The leg to the client (the proxy accepted it).
    case client
    /// The leg to the server (the proxy dialled it).
    case server

    /// The other end.
    package var other: Side { self == .client ? .server : .client }
    /// The direction of bytes this side produces.
    package var producing: Direction { self == .client ? .upstream : .downstream }

    package var description: String { rawValue }
}
