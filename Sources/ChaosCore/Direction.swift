/// Which way bytes travel, in Toxiproxy's words: `upstream` is client→server, `downstream` is
/// server→client.
public enum Direction: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// Client to server.
    case upstream
    /// Server to client.
    case downstream

    /// The side that produces bytes travelling this way.
    public var producer: Side { self == .upstream ? .client : .server }
    /// The side that consumes bytes travelling this way.
    public var consumer: Side { self == .upstream ? .server : .client }
    /// The other way.
    public var reversed: Direction { self == .upstream ? .downstream : .upstream }

    public var description: String { rawValue }
}

/// A set of directions a fault applies to: `upstream`, `downstream` or `both`.
public enum DirectionSet: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case upstream
    case downstream
    case both

    /// Whether bytes travelling `direction` are affected.
    public func contains(_ direction: Direction) -> Bool {
        switch self {
        case .both: true
        case .upstream: direction == .upstream
        case .downstream: direction == .downstream
        }
    }

    /// The directions in the set.
    public var directions: [Direction] { Direction.allCases.filter(contains) }

    public var description: String { rawValue }
}

/// One end of a proxied connection as the proxy sees it.
public enum Side: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The leg to the client (the proxy accepted it).
    case client
    /// The leg to the server (the proxy dialled it).
    case server

    /// The other end.
    public var other: Side { self == .client ? .server : .client }
    /// The direction of bytes this side produces.
    public var producing: Direction { self == .client ? .upstream : .downstream }

    public var description: String { rawValue }
}
