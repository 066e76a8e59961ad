public import ChaosAudit
import ChaosCore

/// The whole result of a run, as written to `report.json` (schema `chaos.report/1`, PRODUCT §5) and read
/// back by `chaos report`. Field names are stable: tools read them.
public struct RunReport: Sendable, Codable, Equatable {
    /// The schema this report follows.
    public static let schemaVersion = "chaos.report/1"

    /// Whether the run passed.
    public enum Verdict: String, Sendable, Codable, Equatable {
        /// Every expectation held.
        case pass
        /// At least one expectation failed.
        case fail
        /// The run could not be judged (the pair did not start, the capture was unreadable, …).
        case error
    }

    /// `chaos.report/1`.
    public var schema: String
    /// The scenario's name.
    public var scenario: String
    /// The seed of the timeline.
    public var seed: UInt64
    /// When the run started, ISO 8601 UTC.
    public var startedAt: String
    /// How long the run lasted (so far, for a checkpoint), in seconds.
    public var elapsedS: Double
    /// How long the run was planned to last, in seconds.
    public var plannedS: Double?
    /// False for a checkpoint, true once the run ended.
    public var complete: Bool
    /// pass, fail or error.
    public var verdict: Verdict
    /// Why the verdict is `error` (or a note on a `fail`).
    public var verdictReason: String?
    /// The command that reproduces the run.
    public var replay: String
    /// The faults injected (those that started before the end).
    public var faults: [FaultRecord]
    /// Delivery counts over every stream.
    public var totals: DeliveryCounts
    /// Delivery counts per stream and direction.
    public var streams: [StreamResult]
    /// The first anomalies, in detail.
    public var anomalies: [Anomaly]
    /// Every anomaly counted by class.
    public var anomalyCounts: [String: Int64]
    /// Recovery timing.
    public var recovery: RecoverySummary
    /// Connection counts.
    public var connections: ConnectionCounts
    /// One entry per `expect:` line.
    public var expectations: [ExpectationResult]
    /// Frames that were ignored, unsequenced, undecodable.
    public var messages: MessageStats
    /// Activity over time, for the timeline.
    public var activity: ActivitySeries
    /// WebSocket handshakes, close codes (per fault too), heartbeats, oversized messages, protocol errors;
    /// absent for lines and length-prefixed framing.
    public var protocolEvents: ProtocolStats?
    /// Exit codes of the pair's processes (name → code), when the runner started a pair.
    public var pairExits: [String: Int32]?
    /// Free-form extra facts (chaos version, host, capture file…).
    public var extra: [String: String]?
    /// What the emulated mobile path did (radio promotions, NAT-killed connections and whether the pair noticed,
    /// retransmission stalls) and the pair's keepalive next to the NAT timeout and radio tail; absent without one.
    public var path: PathSummary? = nil
    /// How long, in seconds, the relay waited for the live audit because the audit's queue was full: the pair then
    /// saw a slower network than the scenario's (0: never; absent for a capture's audit).
    public var auditBackpressureS: Double? = nil
}

/// One fault occurrence of the timeline, as injected.
public struct FaultRecord: Sendable, Codable, Equatable {
    /// The fault kind (`disconnect`, `partition`, …).
    public var kind: String
    /// Its index in the timeline.
    public var occurrence: Int
    /// When it started, seconds since the start.
    public var atS: Double
    /// How long it lasted, in seconds.
    public var forS: Double
    /// Connections it hit (from the runner when it knows, else the connections the audit saw closing because of it).
    public var connections: Int
    /// Its drawn parameters.
    public var detail: [String: String]
    /// Only this proxy (nil: every proxy).
    public var proxy: String?
    /// Time to the next accepted connection, in seconds.
    public var reconnectS: Double?
    /// Time until the slowest interrupted stream delivered a new message, in seconds.
    public var resumeS: Double?

    /// Creates a record.
    public init(
        kind: String,
        occurrence: Int,
        atS: Double,
        forS: Double,
        connections: Int,
        detail: [String: String],
        proxy: String? = nil,
        reconnectS: Double? = nil,
        resumeS: Double? = nil
    ) {
        self.kind = kind
        self.occurrence = occurrence
        self.atS = atS
        self.forS = forS
        self.connections = connections
        self.detail = detail
        self.proxy = proxy
        self.reconnectS = reconnectS
        self.resumeS = resumeS
    }
}

/// Connection counts of a run.
public struct ConnectionCounts: Sendable, Codable, Equatable {
    /// Connections accepted.
    public var opened: Int64
    /// Connections cut by a fault.
    public var cutByFault: Int64
    /// Connection attempts refused.
    public var refused: Int64

    /// Creates counts.
    public init(opened: Int64, cutByFault: Int64, refused: Int64) {
        self.opened = opened
        self.cutByFault = cutByFault
        self.refused = refused
    }
}

/// One `expect:` line, judged.
public struct ExpectationResult: Sendable, Codable, Equatable {
    /// The figure (`lost`, `delivery`, `recovery_p99`, …).
    public var name: String
    /// The bound as the user wrote it, with its comparison (`<= 0`, `>= 99.9%`, `< 10s`).
    public var expected: String
    /// The measured value, formatted in the figure's unit.
    public var actual: String
    /// Whether it held.
    public var ok: Bool
    /// The measured value as a number (count, ratio 0…1 or seconds); nil when it could not be measured.
    public var value: Double?

    /// Creates a judged expectation.
    public init(name: String, expected: String, actual: String, ok: Bool, value: Double?) {
        self.name = name
        self.expected = expected
        self.actual = actual
        self.ok = ok
        self.value = value
    }
}
