/// Everything the audit found, at the end of a run (``complete``) or at a checkpoint.
public struct AuditResult: Sendable, Codable, Equatable {
    /// True once the run ended (``AuditEngine/finish()``); false for a checkpoint snapshot.
    public var complete: Bool
    /// The time of the last event seen, in seconds since the start.
    public var elapsedS: Double
    /// The counts summed over every stream and direction.
    public var totals: DeliveryCounts
    /// Per stream and direction, sorted by stream then direction.
    public var streams: [StreamResult]
    /// The first anomalies in detail (at most ``AuditEngine/anomalyLimit``), in the order they were found.
    public var anomalies: [Anomaly]
    /// How many anomalies of each class were found in all (including those not kept in detail).
    public var anomalyCounts: [String: Int64]
    /// Recovery timing.
    public var recovery: RecoverySummary
    /// Per run-wide fault seen in the event stream.
    public var faults: [FaultImpact]
    /// Connection counts.
    public var connections: ConnectionStats
    /// Messages the audit did not classify.
    public var messages: MessageStats
    /// Activity over time, for the timeline.
    public var activity: ActivitySeries
    /// WebSocket handshakes, close codes, heartbeats, oversized messages; nil when there were none (lines framing).
    public var protocolEvents: ProtocolStats?
    /// What the emulated mobile path did (radio, NAT, loss) and the findings on the pair's keepalive; nil when the
    /// run had no mobile path.
    public var path: PathSummary?

    /// Creates a result.
    public init(
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
public struct ConnectionStats: Sendable, Codable, Equatable {
    /// Connections accepted (`opened` events).
    public var opened: Int64 = 0
    /// Connections that ended.
    public var closed: Int64 = 0
    /// Connections the proxy cut because of a fault.
    public var cutByFault: Int64 = 0
    /// Connection attempts refused.
    public var refused: Int64 = 0

    /// All zero.
    public init() {}
}

/// Frames the audit could not or would not classify.
public struct MessageStats: Sendable, Codable, Equatable {
    /// Frames matched by an `ignore` rule.
    public var ignored: Int64 = 0
    /// Frames in the declared format but without a seq (and not ignored).
    public var unsequenced: Int64 = 0
    /// Frames that could not be read in the declared format.
    public var undecodable: Int64 = 0
    /// Connection directions whose bytes do not fit the declared framing.
    public var framingErrors: Int64 = 0
    /// Seqs below the stream's first seq (`seq_start`), not audited.
    public var belowStart: Int64 = 0
    /// Messages counted as delivered when written, because their consumer's TCP acknowledgements never
    /// came (more than ``PendingDeliveries`` holds on one connection: an event stream without them).
    public var unconfirmed: Int64 = 0
    /// Messages whose seq jumped more than ``AuditEngine/seqJumpLimit`` past the highest of their stream (not audited).
    public var seqJumps: Int64 = 0

    /// All zero.
    public init() {}

    private enum CodingKeys: String, CodingKey {
        case ignored, unsequenced, undecodable, framingErrors, belowStart, unconfirmed, seqJumps
    }

    /// Decodes the counts; `unconfirmed` is absent from reports written before it existed.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ignored = try container.decode(Int64.self, forKey: .ignored)
        unsequenced = try container.decode(Int64.self, forKey: .unsequenced)
        undecodable = try container.decode(Int64.self, forKey: .undecodable)
        framingErrors = try container.decode(Int64.self, forKey: .framingErrors)
        belowStart = try container.decode(Int64.self, forKey: .belowStart)
        unconfirmed = try container.decodeIfPresent(Int64.self, forKey: .unconfirmed) ?? 0
        seqJumps = try container.decodeIfPresent(Int64.self, forKey: .seqJumps) ?? 0
    }
}
