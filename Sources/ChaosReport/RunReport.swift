package import ChaosAudit
package import ChaosCore

/// The whole result of a run, as written to `report.json` (schema `chaos.report/1`, PRODUCT §5) and read
/// back by `chaos report`. Field names are stable: tools read them.
package struct RunReport: Sendable, Codable, Equatable {
    /// The schema this report follows.
    package static let schemaVersion = "chaos.report/1"

    /// Whether the run passed.
    package enum Verdict: String, Sendable, Codable, Equatable {
        /// Every expectation held.
        case pass
        /// At least one expectation failed.
        case fail
        /// The run judged nothing it was meant to judge (no connection through a proxy the pair was meant to use,
        /// bytes but no audited message, fewer messages than the floor): exit 1, as a failure, its reasons first.
        case inconclusive
        /// The run could not be judged (the pair did not start, the capture was unreadable, …).
        case error
    }

    /// `chaos.report/1`.
    package var schema: String
    /// The scenario's name.
    package var scenario: String
    /// The seed of the timeline.
    package var seed: UInt64
    /// When the run started, ISO 8601 UTC.
    package var startedAt: String
    /// How long the run lasted (so far, for a checkpoint), in seconds.
    package var elapsedS: Double
    /// How long the run was planned to last, in seconds.
    package var plannedS: Double?
    /// False for a checkpoint, true once the run ended.
    package var complete: Bool
    /// pass, fail, inconclusive or error.
    package var verdict: Verdict
    /// Why the verdict is `error`, `inconclusive` or `fail` (the first reason).
    package var verdictReason: String?
    /// The command that reproduces the run.
    package var replay: String
    /// The faults injected (those that started before the end).
    package var faults: [FaultRecord]
    /// Delivery counts over every stream.
    package var totals: DeliveryCounts
    /// Delivery counts per stream and direction.
    package var streams: [StreamResult]
    /// The first anomalies, in detail.
    package var anomalies: [Anomaly]
    /// Every anomaly counted by class.
    package var anomalyCounts: [String: Int64]
    /// Recovery timing.
    package var recovery: RecoverySummary
    /// Connection counts.
    package var connections: ConnectionCounts
    /// One entry per `expect:` line.
    package var expectations: [ExpectationResult]
    /// Frames that were ignored, unsequenced, undecodable.
    package var messages: MessageStats
    /// Activity over time, for the timeline.
    package var activity: ActivitySeries
    /// The protocol's handshakes, codes (per fault too), heartbeats, oversized messages, protocol errors;
    /// absent for lines and length-prefixed framing.
    package var protocolEvents: ProtocolStats?
    /// Exit codes of the pair's processes (name → code), when the runner started a pair.
    package var pairExits: [String: Int32]?
    /// Free-form extra facts (chaos version, host, capture file…).
    package var extra: [String: String]?
    /// What the emulated mobile path did (radio promotions, NAT-killed connections and whether the pair noticed,
    /// retransmission stalls) and the pair's keepalive next to the NAT timeout and radio tail; absent without one.
    package var path: PathSummary? = nil
    /// How long, in seconds, the relay waited for the live audit because the audit's queue was full: the pair then
    /// saw a slower network than the scenario's (0: never; absent for a capture's audit).
    package var auditBackpressureS: Double? = nil
    /// Everything the run was meant to judge and did not, each in one sentence (absent when there was none): the
    /// verdict is `inconclusive` unless an expectation failed on what was judged.
    package var inconclusive: [String]? = nil
    /// Every failure of the pair, each tied to the fault occurrences before it (absent when there was none).
    package var failures: [FailureRecord]? = nil
    /// When the first failure was seen, in seconds since the start (absent when there was none).
    package var firstFailureS: Double? = nil
    /// What people did to the run through its control API while it ran (the live page's pause, resume, fault and stop),
    /// in order (absent when nobody did anything).
    package var manual: [ManualAction]? = nil
}

/// One fault occurrence of the timeline, as injected.
package struct FaultRecord: Sendable, Codable, Equatable {
    /// The fault kind (`disconnect`, `partition`, …).
    package var kind: String
    /// Its index in the timeline.
    package var occurrence: Int
    /// When it started, seconds since the start.
    package var atS: Double
    /// How long it lasted, in seconds.
    package var forS: Double
    /// Connections it hit (from the runner when it knows, else the connections the audit saw closing because of it):
    /// those live when it began, plus those opened while it lasted when it reaches new connections too.
    package var connections: Int
    /// Its drawn parameters.
    package var detail: [String: String]
    /// Only this proxy (nil: every proxy).
    package var proxy: String?
    /// Connections opened while it lasted, which it reached too (a lasting fault on every connection; nil otherwise).
    package var openedWhileOn: Int? = nil
    /// Streams it interrupted that never delivered a new message afterwards (absent: none).
    package var neverResumed: Int? = nil
    /// Time to the next accepted connection, in seconds.
    package var reconnectS: Double?
    /// Time until the slowest interrupted stream delivered a new message, in seconds.
    package var resumeS: Double?
    /// What the ends' TCPs met on the connections it made dead (a partition, a stall, a NAT's death, an offline link, a
    /// handoff's blackout; absent otherwise).
    package var deadPath: DeadPathFigures? = nil

    /// Creates a record.
    package init(
        kind: String,
        occurrence: Int,
        atS: Double,
        forS: Double,
        connections: Int,
        detail: [String: String],
        proxy: String? = nil,
        reconnectS: Double? = nil,
        resumeS: Double? = nil,
        openedWhileOn: Int? = nil,
        neverResumed: Int? = nil
    ) {
        self.openedWhileOn = openedWhileOn
        self.neverResumed = neverResumed
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
package struct ConnectionCounts: Sendable, Codable, Equatable {
    /// Connections accepted.
    package var opened: Int64
    /// Connections cut by a fault.
    package var cutByFault: Int64
    /// Connection attempts refused.
    package var refused: Int64

    /// Creates counts.
    package init(opened: Int64, cutByFault: Int64, refused: Int64) {
        self.opened = opened
        self.cutByFault = cutByFault
        self.refused = refused
    }
}

/// One `expect:` line, judged.
package struct ExpectationResult: Sendable, Codable, Equatable {
    /// The figure (`lost`, `delivery`, `recovery_p99`, …).
    package var name: String
    /// The bound as the user wrote it, with its comparison (`<= 0`, `>= 99.9%`, `< 10s`).
    package var expected: String
    /// The measured value, formatted in the figure's unit.
    package var actual: String
    /// Whether it held.
    package var ok: Bool
    /// The measured value as a number (count, ratio 0…1 or seconds); nil when it could not be measured.
    package var value: Double?

    /// Creates a judged expectation.
    package init(name: String, expected: String, actual: String, ok: Bool, value: Double?) {
        self.name = name
        self.expected = expected
        self.actual = actual
        self.ok = ok
        self.value = value
    }
}
