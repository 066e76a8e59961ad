package import ChaosAudit
package import ChaosCore
package import Foundation

/// Everything a run knows at its end (or at a checkpoint), from which ``RunReport`` is built.
package struct ReportInputs: Sendable {
    /// The scenario's name.
    package var scenario: String
    /// The seed.
    package var seed: UInt64
    /// When the run started.
    package var startedAt: Date
    /// How long it ran (so far).
    package var elapsed: ChaosDuration
    /// How long it was planned to run.
    package var planned: ChaosDuration?
    /// False for a checkpoint.
    package var complete: Bool
    /// The fault timeline.
    package var timeline: Timeline
    /// The audit's result.
    package var audit: AuditResult
    /// Connection counts, when the runner counts them itself (else the audit's are used).
    package var connections: ConnectionCounts?
    /// Occurrence index → connections that occurrence hit, as the runner counted them.
    package var faultConnections: [Int: Int]
    /// Occurrence index → connections opened while it lasted (a lasting fault on every connection, once it ended).
    package var faultOpenedWhileOn: [Int: Int] = [:]
    /// The `expect:` lines.
    package var expectations: [Expectation]
    /// The command that reproduces the run.
    package var replay: String
    /// Exit codes of the pair's processes.
    package var pairExits: [String: Int32]?
    /// Set when the run could not be judged: the verdict is then `error` with this reason.
    package var errorReason: String?
    /// How long the relay waited for the live audit, in seconds (nil: no live audit).
    package var auditBackpressureS: Double?
    /// Free-form extra facts.
    package var extra: [String: String]?
    /// The fleet's agents that applied the timeline (a `chaos run --agent` run, or a merge): each fault's detail names
    /// them (`agents`).
    package var faultAgents: [String]?
    /// A merge of agents that each drew their own timeline (`per-agent`): occurrence index → the agent that applied it
    /// (named instead of ``faultAgents``).
    package var faultAgentByOccurrence: [Int: String]?
    /// Where the timeline's zero is on the run's clock: zero, or the moment the clients were connected (a pair whose
    /// client says `ready: connected`). Each fault is reported at its time on the run's clock, as anomalies are.
    package var timelineOrigin: ChaosDuration = .zero
    /// What the run was meant to judge beyond its expectations (nil: nothing more): a run that judged none of it is
    /// `inconclusive`.
    package var scope: JudgedScope? = nil
    /// The pair processes that exited during the run (`client-1 with status 0 at 00:00:12.100`): the run is judged on
    /// what it saw (a stream that never resumed is the finding), and is `error` only when nothing failed.
    package var pairExitedEarly: String? = nil
    /// How far before a failure a fault is named with it, in seconds.
    package var failureWindowS: Double = RunReport.failureWindowS

    /// Creates the inputs; only the first few are required.
    package init(
        scenario: String,
        seed: UInt64,
        startedAt: Date,
        elapsed: ChaosDuration,
        complete: Bool,
        timeline: Timeline,
        audit: AuditResult,
        expectations: [Expectation],
        replay: String,
        planned: ChaosDuration? = nil,
        connections: ConnectionCounts? = nil,
        faultConnections: [Int: Int] = [:],
        pairExits: [String: Int32]? = nil,
        errorReason: String? = nil,
        extra: [String: String]? = nil,
        auditBackpressureS: Double? = nil,
        faultAgents: [String]? = nil,
        faultAgentByOccurrence: [Int: String]? = nil
    ) {
        self.scenario = scenario
        self.seed = seed
        self.startedAt = startedAt
        self.elapsed = elapsed
        self.planned = planned
        self.complete = complete
        self.timeline = timeline
        self.audit = audit
        self.connections = connections
        self.faultConnections = faultConnections
        self.expectations = expectations
        self.replay = replay
        self.pairExits = pairExits
        self.errorReason = errorReason
        self.extra = extra
        self.auditBackpressureS = auditBackpressureS
        self.faultAgents = faultAgents
        self.faultAgentByOccurrence = faultAgentByOccurrence
    }
}

extension RunReport {
    /// One formatter for every report: a checkpoint every minute of a 72-hour soak must not build a new one.
    nonisolated(unsafe) static let timestampFormatter: ISO8601DateFormatter = {
        // Safe to share: it is configured once here and only read (string(from:)) afterwards.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter
    }()

    /// Builds the report: faults from the timeline (those that started by the end), the audit's figures, and
    /// every expectation judged into the verdict.
    package init(_ inputs: ReportInputs) {
        let audit = inputs.audit
        let impacts = Dictionary(audit.faults.map { ($0.occurrence, $0) }, uniquingKeysWith: { first, _ in first })
        let origin = inputs.timelineOrigin
        let faults = inputs.timeline.occurrences(through: .nanoseconds(inputs.elapsed.nanoseconds - origin.nanoseconds)).map { occurrence in
            let impact = impacts[occurrence.index]
            var detail = Dictionary(occurrence.effect.parameters, uniquingKeysWith: { first, _ in first })
            if let agent = inputs.faultAgentByOccurrence?[occurrence.index] {
                detail["agents"] = agent
            } else if let agents = inputs.faultAgents {
                detail["agents"] = agents.joined(separator: ", ")
            }
            var record = FaultRecord(
                kind: occurrence.kind.rawValue,
                occurrence: occurrence.index,
                atS: (origin + inputs.timeline.begin(of: occurrence)).seconds,
                forS: occurrence.lasts.seconds,
                connections: inputs.faultConnections[occurrence.index] ?? impact?.connectionsClosed ?? 0,
                detail: detail,
                proxy: occurrence.proxy,
                reconnectS: impact?.reconnectS,
                resumeS: impact?.resumeS,
                openedWhileOn: inputs.faultOpenedWhileOn[occurrence.index],
                neverResumed: impact.flatMap { $0.neverResumed > 0 ? $0.neverResumed : nil }
            )
            record.deadPath = impact?.deadPath
            return record
        }
        // Faults and toxics added through the control API are not in the timeline: their marks tell what they were.
        let added = audit.faults.filter { $0.occurrence >= FaultMark.apiOccurrence(id: 1, index: 0) }.map { impact in
            FaultRecord(
                kind: impact.kind,
                occurrence: impact.occurrence,
                atS: impact.atS,
                forS: impact.forS,
                connections: impact.connectionsClosed,
                detail: ["added_by": "control API", "what": impact.detail ?? ""],
                reconnectS: impact.reconnectS,
                resumeS: impact.resumeS
            )
            .with(deadPath: impact.deadPath)
        }
        let formatter = RunReport.timestampFormatter
        self.init(
            schema: Self.schemaVersion,
            scenario: inputs.scenario,
            seed: inputs.seed,
            startedAt: formatter.string(from: inputs.startedAt),
            elapsedS: inputs.elapsed.seconds,
            plannedS: inputs.planned?.seconds,
            complete: inputs.complete,
            verdict: .pass,
            verdictReason: nil,
            replay: inputs.replay,
            faults: faults + added,
            totals: audit.totals,
            streams: audit.streams,
            anomalies: audit.anomalies,
            anomalyCounts: audit.anomalyCounts,
            recovery: audit.recovery,
            connections: inputs.connections
                ?? ConnectionCounts(
                    opened: audit.connections.opened,
                    cutByFault: audit.connections.cutByFault,
                    refused: audit.connections.refused
                ),
            expectations: [],
            messages: audit.messages,
            activity: audit.activity,
            protocolEvents: audit.protocolEvents,
            pairExits: inputs.pairExits,
            extra: inputs.extra,
            path: audit.path,
            auditBackpressureS: inputs.auditBackpressureS
        )
        judge(inputs.expectations, errorReason: inputs.errorReason, scope: inputs.scope, pairExitedEarly: inputs.pairExitedEarly)
        let failures = failureRecords(window: inputs.failureWindowS)
        self.failures = failures.isEmpty ? nil : failures
        firstFailureS = failures.first?.atS
    }
}

extension FaultRecord {
    /// This record with `deadPath`.
    func with(deadPath: DeadPathFigures?) -> FaultRecord {
        var record = self
        record.deadPath = deadPath
        return record
    }
}
