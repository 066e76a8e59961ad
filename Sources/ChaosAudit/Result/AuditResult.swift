/// Everything the audit found, at the end of a run (``complete``) or at a checkpoint.
package struct AuditResult: Sendable, Codable, Equatable {
    /// True once the run ended (``AuditEngine/finish()``); false for a checkpoint snapshot.
    package var complete: Bool
    /// The time of the last event seen, in seconds since the start.
    package var elapsedS: Double
    /// The counts summed over every stream and direction.
    package var totals: DeliveryCounts
    /// Per stream and direction, sorted by stream then direction.
    package var streams: [StreamResult]
    /// The first anomalies in detail (at most ``AuditEngine/anomalyLimit``), in the order they were found.
    package var anomalies: [Anomaly]
    /// How many anomalies of each class were found in all (including those not kept in detail).
    package var anomalyCounts: [String: Int64]
    /// Recovery timing.
    package var recovery: RecoverySummary
    /// Per run-wide fault seen in the event stream.
    package var faults: [FaultImpact]
    /// Connection counts.
    package var connections: ConnectionStats
    /// Messages the audit did not classify.
    package var messages: MessageStats
    /// Activity over time, for the timeline.
    package var activity: ActivitySeries
    /// The protocol's handshakes, codes, heartbeats, oversized messages; nil when there were none (lines framing).
    package var protocolEvents: ProtocolStats?
    /// What the emulated mobile path did (radio, NAT, loss) and the findings on the pair's keepalive; nil when the
    /// run had no mobile path.
    package var path: PathSummary?

    /// Creates a result.
    package init(
        complete: Bool,
        elapsedS: Double,
        totals: DeliveryCounts,
        streams: [StreamResult],
        anomalies: [Anomaly],
        anomalyCounts: [String: Int64],
        recovery: RecoverySummary,
        faults: [FaultImpact],
        connections: ConnectionStats,
        messages: MessageStats,
        activity: ActivitySeries,
        protocolEvents: ProtocolStats? = nil,
        path: PathSummary? = nil
    ) {
        self.path = path
        self.complete = complete
        self.elapsedS = elapsedS
        self.totals = totals
        self.streams = streams
        self.anomalies = anomalies
        self.anomalyCounts = anomalyCounts
        self.recovery = recovery
        self.faults = faults
        self.connections = connections
        self.messages = messages
        self.activity = activity
        self.protocolEvents = protocolEvents
    }
}

/// Connection counts as the audit saw them.
package struct ConnectionStats: Sendable, Codable, Equatable {
    /// Connections accepted (`opened` events).
    package var opened: Int64 = 0
    /// Connections that ended.
    package var closed: Int64 = 0
    /// Connections the proxy cut because of a fault.
    package var cutByFault: Int64 = 0
    /// Connection attempts refused.
    package var refused: Int64 = 0

    /// All zero.
    package init() {}
}

/// Frames the audit could not or would not classify.
package struct MessageStats: Sendable, Codable, Equatable {
    /// Frames matched by an `ignore` rule.
    package var ignored: Int64 = 0
    /// Frames in the declared format but without a seq (and not ignored).
    package var unsequenced: Int64 = 0
    /// Frames that could not be read in the declared format.
    package var undecodable: Int64 = 0
    /// Connection directions whose bytes do not fit the declared framing.
    package var framingErrors: Int64 = 0
    /// Seqs below the stream's first seq (`seq_start`), not audited.
    package var belowStart: Int64 = 0
    /// Messages counted as delivered when written, because their consumer's TCP acknowledgements never
    /// came (more than ``PendingDeliveries`` holds on one connection: an event stream without them).
    package var unconfirmed: Int64 = 0
    /// Messages whose seq jumped more than ``AuditEngine/seqJumpLimit`` past the highest of their stream (not audited).
    package var seqJumps: Int64 = 0
    /// Messages read from producers without a seq (``unsequenced`` counts their written copies too).
    package var unsequencedRead: Int64 = 0
    /// `fanout:`: messages written to a connection before it named its receiver (its first own message), not audited.
    package var unattributed: Int64 = 0
    /// Messages written on an RPC call after its consumer had ended it (not delivered: its stack drops them).
    package var afterCallEnded: Int64 = 0
    /// The first message read from a producer without a seq (nil: none): where it was and what it holds.
    package var firstUnsequenced: UnreadMessage? = nil

    /// All zero.
    package init() {}

    private enum CodingKeys: String, CodingKey {
        case ignored, unsequenced, undecodable, framingErrors, belowStart, unconfirmed, seqJumps, unsequencedRead, firstUnsequenced
        case unattributed, afterCallEnded
    }

    /// Decodes the counts; `unconfirmed` is absent from reports written before it existed.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ignored = try container.decode(Int64.self, forKey: .ignored)
        unsequenced = try container.decode(Int64.self, forKey: .unsequenced)
        undecodable = try container.decode(Int64.self, forKey: .undecodable)
        framingErrors = try container.decode(Int64.self, forKey: .framingErrors)
        belowStart = try container.decode(Int64.self, forKey: .belowStart)
        unconfirmed = try container.decodeIfPresent(Int64.self, forKey: .unconfirmed) ?? 0
        seqJumps = try container.decodeIfPresent(Int64.self, forKey: .seqJumps) ?? 0
        unsequencedRead = try container.decodeIfPresent(Int64.self, forKey: .unsequencedRead) ?? 0
        unattributed = try container.decodeIfPresent(Int64.self, forKey: .unattributed) ?? 0
        afterCallEnded = try container.decodeIfPresent(Int64.self, forKey: .afterCallEnded) ?? 0
        firstUnsequenced = try container.decodeIfPresent(UnreadMessage.self, forKey: .firstUnsequenced)
    }
}

/// A message the audit framed but could not judge (its seq could not be read): where it was and what it holds, so
/// that a `seq:` that names the wrong key is seen at once.
package struct UnreadMessage: Sendable, Codable, Equatable {
    /// The connection that carried it.
    package var connection: UInt64
    /// `upstream` (client → server) or `downstream`.
    package var direction: String
    /// Where it ends in that direction's bytes (the offset just past its last byte on the wire).
    package var end: Int64
    /// Its first bytes, as text (at most ``excerptLimit`` characters).
    package var excerpt: String
    /// Where the scenario says the seq is (`seq:`).
    package var seqField: String
    /// The top-level keys it has, for a JSON message (empty otherwise).
    package var keys: [String]

    /// How much of the message an excerpt keeps.
    package static let excerptLimit = 60

    /// Creates a sample.
    package init(connection: UInt64, direction: String, end: Int64, excerpt: String, seqField: String, keys: [String]) {
        self.connection = connection
        self.direction = direction
        self.end = end
        self.excerpt = excerpt
        self.seqField = seqField
        self.keys = keys
    }

    /// `first: the message ending at byte 47 of connection #1 (upstream): `{"type":"DATA",…` (no `sequence_id`; its
    /// keys: type, seq)`.
    package var sentence: String {
        "first: the message ending at byte \(end) of connection #\(connection) (\(direction)): `\(excerpt)` (no `\(seqField)`"
            + (keys.isEmpty ? ")" : "; its keys: \(keys.joined(separator: ", ")))")
    }
}
