/// How the audit finds messages and their sequence numbers in the byte stream (`protocol:`).
package struct ProtocolSpec: Sendable, Codable, Equatable {
    /// How a message's fields are read.
    package enum Format: String, Sendable, Codable, Equatable, CaseIterable {
        case json
        case text
        case protobuf
    }

    /// Message framing.
    package var framing: Framing
    /// Message format.
    package var format: Format
    /// Where the sequence number is: a JSON key or pointer (`/meta/seq`), a regex group name, a protobuf field number.
    package var seq: String
    /// Where the logical stream name is; nil: one stream per connection direction.
    package var stream: String?
    /// Where a message id is, for cross-stream duplicate checks.
    package var id: String?
    /// Where a cumulative acknowledgement is (covers every seq <= it in the other direction).
    package var ack: String?
    /// Where the message type is (default `type`), for `ignore`.
    package var type: String
    /// Field name → values: messages whose field has one of these values are not audited.
    package var ignore: [String: [String]]
    /// For `format: text`: a regular expression with named groups (`seq`, `stream`, …).
    package var regex: String?
    /// The first seq of every stream (default 1).
    package var seqStart: Int64
    /// Client → server overrides of seq / stream / ack / type / ignore (`upstream:`).
    package var upstream: DirectionOverride?
    /// Server → client overrides (`downstream:`).
    package var downstream: DirectionOverride?
    /// The largest message the audit buffers (`max_message`, default ``defaultMessageCap``); nil: the default.
    package var maxMessage: Int?
    /// A framing with RPCs: the schema file (`descriptors:`, absolute once read from a scenario) that names fields and
    /// gives each RPC's request and response types, read by the framing's plug-in.
    package var descriptors: String?
    /// A framing with RPCs: the RPCs audited (`/package.Service/Method`); nil: every RPC.
    package var methods: [String]?
    /// NSS key logs (`keylog:`, absolute once read from a scenario) that `chaos audit` decrypts a capture's TLS with.
    package var keylog: [String]?
    /// The framing's list options by scenario key (``FramingTraits/listOptionKeys``: `topics`); nil: none given.
    package var lists: [String: [String]]?
    /// Messages fanned out across connections (`fanout:`, a chat server); nil: each stream has one consumer at a time.
    package var fanout: Fanout?
    /// What carries the framing's bytes when it is not the proxy's own stream (`transport: quic`: the streams of QUIC
    /// connections on a `udp://` proxy, opened with `keylog`); nil: the TCP connection, or the datagram.
    package var transport: Transport?

    /// `transport:` of `protocol:`.
    package enum Transport: String, Sendable, Codable, Equatable, CaseIterable {
        /// Each QUIC stream of a UDP flow is audited as a connection of its own (`keylog` opens the packets).
        case quic
    }

    /// `fanout: {sender: PATH, seq: PATH, receiver: KEY}`: a message a client sends names its sender (its stream) and
    /// its seq; what the server writes to each client is that client's own copy of the sender's stream, judged per
    /// receiver: every message of every sender, once, in order, from the receiver's first connection on.
    package struct Fanout: Sendable, Codable, Equatable {
        /// The path of the sender's name in a message (both ways): the stream.
        package var sender: String
        /// The path of the sender's seq in a message (both ways).
        package var seq: String
        /// What names the client a connection delivers to: `header:NAME` or `query:NAME` of its handshake; nil (or
        /// ``sender``): the sender name of the first message it sends.
        package var receiver: String?
        /// The path of a receiver's resume point in a message it sends (format json): an object naming, per sender,
        /// the highest seq its application holds (`{"u1": 45, "u3": 44}`, a chat client's hello after a reconnect).
        /// Copies an earlier connection delivered above it were never its application's. nil: none is read.
        package var resume: String?

        /// A fan-out: `sender` and `seq` paths, the receiver named by `receiver` (nil: the connection's own sender name),
        /// its resume point at `resume` (nil: none).
        package init(sender: String, seq: String, receiver: String? = nil, resume: String? = nil) {
            self.sender = sender
            self.seq = seq
            self.receiver = receiver
            self.resume = resume
        }

        /// Where the receiver's name comes from (nil: the connection's own first message).
        package var receiverSource: StreamSource? { receiver.map(ProtocolSpec.streamSource(of:)) }

        /// Whether the receiver is named by the connection's handshake (`header:`/`query:`) rather than its messages.
        package var receiverFromHandshake: Bool {
            switch receiverSource {
            case .header, .query: true
            case .field, .rpc, nil: false
            }
        }
    }

    /// Creates a protocol spec; defaults match the reference pair's NDJSON (framing `lines`).
    package init(
        framing: Framing = Framing(name: "lines"),
        format: Format = .json,
        seq: String = "seq",
        stream: String? = "stream",
        id: String? = nil,
        ack: String? = nil,
        type: String = "type",
        ignore: [String: [String]] = [:],
        regex: String? = nil,
        seqStart: Int64 = 1,
        upstream: DirectionOverride? = nil,
        downstream: DirectionOverride? = nil,
        maxMessage: Int? = nil,
        descriptors: String? = nil,
        methods: [String]? = nil
    ) {
        self.framing = framing
        self.format = format
        self.seq = seq
        self.stream = stream
        self.id = id
        self.ack = ack
        self.type = type
        self.ignore = ignore
        self.regex = regex
        self.seqStart = seqStart
        self.upstream = upstream
        self.downstream = downstream
        self.maxMessage = maxMessage
        self.descriptors = descriptors
        self.methods = methods
    }
}

/// One `expect:` line: a measured figure, a comparison and a bound.
package struct Expectation: Sendable, Codable, Equatable {
    /// What is measured: `lost`, `duplicated`, `delivery`, `recovery_p99`, …
    package var name: String
    /// The comparison.
    package var comparison: Comparison
    /// The bound, as a number in the figure's unit (a count, a ratio 0…1, or seconds).
    package var bound: Double
    /// The bound as the user wrote it (`0`, `>= 99.9%`, `< 10s`).
    package var written: String

    /// A comparison operator.
    package enum Comparison: String, Sendable, Codable, Equatable, CaseIterable {
        case lessThan = "<"
        case atMost = "<="
        case equal = "=="
        case atLeast = ">="
        case greaterThan = ">"

        /// Whether `actual` satisfies `actual <op> bound`.
        package func holds(_ actual: Double, _ bound: Double) -> Bool {
            switch self {
            case .lessThan: actual < bound
            case .atMost: actual <= bound
            case .equal: actual == bound
            case .atLeast: actual >= bound
            case .greaterThan: actual > bound
            }
        }
    }

    /// The unit of an expectation's figure.
    package enum Unit: Sendable { case count, ratio, seconds }

    /// The figures an expectation may name, with their units.
    package static let known: [(name: String, unit: Unit)] = [
        ("lost", .count), ("duplicated", .count), ("redelivered", .count), ("retained", .count), ("reordered", .count),
        ("gaps", .count), ("unacked", .count), ("unconfirmed", .count), ("recovered", .count), ("delivered", .count), ("sent", .count),
        ("lost_qos0", .count),
        ("delivery", .ratio),
        ("recovery_p50", .seconds), ("recovery_p95", .seconds), ("recovery_p99", .seconds), ("recovery_max", .seconds),
        ("reconnect_p50", .seconds), ("reconnect_p95", .seconds), ("reconnect_p99", .seconds), ("reconnect_max", .seconds),
        ("transit_p99", .seconds), ("faults", .count), ("pair_exits", .count),
        ("messages", .count), ("faults_fired", .ratio),
    ]

    /// Figures that are floors: a bare number means `>=` (`messages: 1000` is at least 1000 messages).
    package static let floors: Set<String> = ["messages", "faults_fired"]
    /// A floor that is not met leaves the run `inconclusive` (too little was judged), not failed.
    package static let judgedTooLittle: Set<String> = ["messages"]

    /// Creates an expectation.
    package init(name: String, comparison: Comparison, bound: Double, written: String) {
        self.name = name
        self.comparison = comparison
        self.bound = bound
        self.written = written
    }
}
