extension ProtocolSpec {
    /// The largest message buffered by default: 16 MiB. A larger one is counted as oversized, not kept.
    package static let defaultMessageCap = 16 << 20
    /// The bounds of `max_message`.
    package static let messageCapRange = 1024...(1 << 30)

    /// The largest message the audit buffers.
    package var messageCap: Int { maxMessage ?? Self.defaultMessageCap }

    /// Per-direction overrides of the fields the audit reads (`upstream:` / `downstream:`): the two directions of
    /// one protocol often carry different message types.
    package struct DirectionOverride: Sendable, Codable, Equatable {
        /// Where this direction's sequence number is.
        package var seq: String?
        /// Where this direction's logical stream name is (a field, `header:NAME`, `query:NAME` or `rpc`).
        package var stream: String?
        /// Where this direction's cumulative acknowledgement is.
        package var ack: String?
        /// Where this direction's message type is.
        package var type: String?
        /// This direction's ignore rules (they replace the shared ones).
        package var ignore: [String: [String]]?

        /// Creates an override; nil fields keep the shared value.
        package init(
            seq: String? = nil,
            stream: String? = nil,
            ack: String? = nil,
            type: String? = nil,
            ignore: [String: [String]]? = nil
        ) {
            self.seq = seq
            self.stream = stream
            self.ack = ack
            self.type = type
            self.ignore = ignore
        }
    }

    /// The spec as `direction` sees it: the shared fields with that direction's overrides applied.
    package func resolved(for direction: Direction) -> ProtocolSpec {
        var spec = self
        spec.upstream = nil
        spec.downstream = nil
        guard let override = direction == .upstream ? upstream : downstream else { return spec }
        if let seq = override.seq { spec.seq = seq }
        if let stream = override.stream { spec.stream = stream }
        if let ack = override.ack { spec.ack = ack }
        if let type = override.type { spec.type = type }
        if let ignore = override.ignore { spec.ignore = ignore }
        return spec
    }

    /// Where a logical stream's name comes from.
    package enum StreamSource: Sendable, Equatable {
        /// A field of each message.
        case field(String)
        /// A header of the request that opened the stream (`header:NAME`).
        case header(String)
        /// A query parameter of the target of the request that opened the stream (`query:NAME`).
        case query(String)
        /// Each RPC call is a stream of its own (`rpc`; only a framing with RPCs takes it: a field named `rpc` is `/rpc`).
        case rpc
    }

    /// Where the stream name comes from; nil: one stream per connection and direction.
    package var streamSource: StreamSource? { stream.map(Self.streamSource(of:)) }

    /// Where a key as a scenario writes it (`header:NAME`, `query:NAME`, `rpc`, a field) takes a name from.
    package static func streamSource(of key: String) -> StreamSource {
        if key == "rpc" { return .rpc }
        if key.hasPrefix("header:") { return .header(String(key.dropFirst("header:".count))) }
        if key.hasPrefix("query:") { return .query(String(key.dropFirst("query:".count))) }
        return .field(key)
    }
}
