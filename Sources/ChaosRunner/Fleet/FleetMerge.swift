import ChaosAudit
package import ChaosCore
package import ChaosReport
package import Foundation

/// `chaos report --merge DIR…`: the run folders of a fleet's agents (`chaos run --agent`) joined into one audit and
/// one report. The agents' events are streamed from their `events.bin` rings and merged by wall-clock time (each
/// agent's clock zero, less its host clock's offset: given with `--clock-offset`, else as measured when the merge
/// fetched the agent by URL, ``MeasuredClockOffset``), so a logical stream whose connections went
/// through different agents is judged as one stream. Memory is a chunk per agent plus the audit's own state (open
/// connections and streams), not the run's length.
package enum FleetMerge {
    /// One agent's run folder, opened.
    struct Agent {
        let folder: String
        let reader: EventFileReader
        let scenario: Scenario
        let timeline: Timeline
        let report: RunReport?
        /// Nanoseconds to add to this agent's event times to put them on the merged timeline.
        var shift: Int64 = 0
        var name: String { reader.header.agent }
    }

    /// A pending event of agent `agent`, ordered by merged time, then agent, then its order in the agent's file.
    struct Pending: Comparable {
        let time: Int64
        let agent: Int
        let order: Int64
        let event: TrafficEvent
        static func < (lhs: Pending, rhs: Pending) -> Bool { (lhs.time, lhs.agent, lhs.order) < (rhs.time, rhs.agent, rhs.order) }
        static func == (lhs: Pending, rhs: Pending) -> Bool { (lhs.time, lhs.agent, lhs.order) == (rhs.time, rhs.agent, rhs.order) }
    }

    /// Connection numbers of agent `index` (from 0) on the merged timeline: the agent's own plus `index` × this.
    package static let connectionStride: ConnectionID = 1_000_000_000

    /// Merges `folders` into `out` (nil: `Reports/<scenario>-merged-<time>/`). `clockOffsets`: agent name → nanoseconds
    /// its clock was ahead of true time (subtracted), over what a folder's `clock-offset.json` measured. Returns the
    /// report and its folder.
    package static func merge(
        folders: [String],
        out: String?,
        clockOffsets: [String: Int64] = [:],
        command: String
    )
        throws -> (report: RunReport, folder: URL)
    {
        var agents = try open(folders)
        for name in clockOffsets.keys where !agents.contains(where: { $0.name == name }) {
            throw ChaosError.badInput(
                "--clock-offset names agent '\(name)', which is not among the merged agents (\(agents.map(\.name).joined(separator: ", ")))"
            )
        }
        let measured = try agents.map { try MeasuredClockOffset.load(folder: $0.folder) }
        let clocks = agents.indices.map { index in
            AgentClockState(given: clockOffsets[agents[index].name], measured: measured[index], header: agents[index].reader.header)
        }
        let zeros = agents.indices.map { agents[$0].reader.header.startedAtNs - clocks[$0].offsetNs }
        let base = zeros.min() ?? 0
        for index in agents.indices { agents[index].shift = zeros[index] - base }
        let first = agents[0]
        let schedule = first.scenario.fleet?.schedule == .perAgent ? ownTimelines(agents) : nil
        let engine = try AuditEngine(spec: first.scenario.protocolSpec ?? ProtocolSpec())
        engine.pathLimits = first.scenario.pathLimits
        try feed(agents, into: engine, audits: first.scenario.protocolSpec != nil, occurrences: schedule?.occurrences)
        let audit = engine.finish()
        let report = RunReport(inputs(agents, audit: audit, base: base, clocks: clocks, command: command, schedule: schedule))
        let folder = try RunFolder(scenario: first.scenario.name + "-merged", out: out)
        try report.write(toDirectory: folder.url.path)
        // One timeline every agent applied: the merged folder replays (and shrinks) on one machine as an agent's does.
        if schedule == nil { try folder.saveReplayInputs(scenario: first.scenario, timeline: first.timeline) }
        return (report, folder.url)
    }

    /// Opens every folder and checks that they are one fleet's: one scenario, one seed, distinct agent names.
    static func open(_ folders: [String]) throws -> [Agent] {
        guard !folders.isEmpty else { throw ChaosError.badInput("--merge needs at least one agent's run folder") }
        var agents: [Agent] = []
        for folder in folders {
            guard FileManager.default.fileExists(atPath: folder) else {
                throw ChaosError.badInput("\(folder): no such run folder")
            }
            let reader = try EventFileReader(folder: folder)
            let (scenario, timeline) = try RunFolder.loadReplayInputs(from: folder)
            let report = try? RunReport.load(fromDirectory: folder)
            let agent = Agent(folder: folder, reader: reader, scenario: scenario, timeline: timeline, report: report)
            if let other = agents.first(where: { $0.name == agent.name }) {
                throw ChaosError.badInput("\(folder) and \(other.folder) are both agent '\(agent.name)': each agent of a fleet needs its own name")
            }
            if let other = agents.first {
                let header = agent.reader.header
                let expected = other.reader.header
                if header.seed != expected.seed {
                    throw ChaosError.badInput(
                        "agent '\(agent.name)' (\(folder)) ran seed \(header.seed), agent '\(other.name)' (\(other.folder)) "
                            + "seed \(expected.seed): a merge needs every agent on one scenario and seed"
                    )
                }
                if header.scenarioDigest != expected.scenarioDigest || header.scenario != expected.scenario {
                    throw ChaosError.badInput(
                        "agent '\(agent.name)' (\(folder)) ran another scenario than agent '\(other.name)' (\(other.folder)): "
                            + "'\(header.scenario)' and '\(expected.scenario)' differ in their timeline, protocol or expectations"
                    )
                }
            }
            agents.append(agent)
        }
        return agents
    }

    /// Under `fleet: {schedule: per-agent}`, each agent applied its own timeline: the merged one holds every agent's
    /// occurrences (shifted to the merged clock, numbered anew in time order), with the agent that applied each.
    struct OwnTimelines {
        var timeline: Timeline
        /// Per agent: its occurrence index → the merged one.
        var occurrences: [[Int: Int]]
        /// Merged occurrence index → agent name.
        var agentOf: [Int: String]
    }

    static func ownTimelines(_ agents: [Agent]) -> OwnTimelines {
        var all: [(agent: Int, occurrence: FaultOccurrence)] = []
        var duration: Int64 = 0
        for (index, agent) in agents.enumerated() {
            let through = agent.report.map { ChaosDuration.nanoseconds(Int64($0.elapsedS * 1e9)) } ?? agent.timeline.duration
            for var occurrence in agent.timeline.occurrences(through: through) {
                // Where the agent's schedule was paused, its occurrences began later: the merged timeline has them then.
                occurrence.at = .nanoseconds(agent.timeline.begin(of: occurrence).nanoseconds + agent.shift)
                all.append((index, occurrence))
            }
            duration = max(duration, agent.timeline.duration.nanoseconds + agent.shift)
        }
        all.sort { ($0.occurrence.at.nanoseconds, $0.agent) < ($1.occurrence.at.nanoseconds, $1.agent) }
        var map = [[Int: Int]](repeating: [:], count: agents.count)
        var agentOf: [Int: String] = [:]
        var merged: [FaultOccurrence] = []
        for (number, entry) in all.enumerated() {
            map[entry.agent][entry.occurrence.index] = number
            agentOf[number] = agents[entry.agent].name
            var occurrence = entry.occurrence
            occurrence.index = number
            merged.append(occurrence)
        }
        return OwnTimelines(
            timeline: Timeline(seed: agents[0].reader.header.seed, duration: .nanoseconds(duration), occurrences: merged),
            occurrences: map,
            agentOf: agentOf
        )
    }

    /// Streams every agent's events into `engine` in merged time order. `occurrences` (per-agent timelines): each
    /// agent's fault marks renumbered to the merged timeline's; nil (a shared timeline): run-wide marks count once.
    static func feed(_ agents: [Agent], into engine: AuditEngine, audits: Bool, occurrences: [[Int: Int]]? = nil) throws {
        var heap = MinHeap<Pending>()
        var order = [Int64](repeating: 0, count: agents.count)
        func pull(_ index: Int) throws {
            guard let event = try agents[index].reader.next() else { return }
            order[index] += 1
            heap.insert(Pending(time: event.time + agents[index].shift, agent: index, order: order[index], event: event))
        }
        for index in agents.indices { try pull(index) }
        // A shared schedule strikes every agent with the same occurrence: run-wide marks count once.
        var runWideMarks = Set<String>()
        var stopped = false
        while let next = heap.popMin() {
            try pull(next.agent)
            var event = next.event
            event.time = next.time
            if case .faultStarted(var mark) = event.kind, mark.connections != nil || mark.draw != nil {
                // The connections an agent aimed at, under their merged numbers; a draw is over the agent's own numbers,
                // and a shared schedule's mark counts once for every agent: either reaches every connection in scope.
                mark.connections = occurrences == nil ? nil : mark.connections?.map { $0 + ConnectionID(next.agent) * connectionStride }
                mark.draw = nil
                event.kind = .faultStarted(mark)
            }
            if let occurrences {
                switch event.kind {
                case .faultStarted(var mark):
                    mark.occurrence = occurrences[next.agent][mark.occurrence] ?? mark.occurrence
                    event.kind = .faultStarted(mark)
                case .faultEnded(var mark):
                    mark.occurrence = occurrences[next.agent][mark.occurrence] ?? mark.occurrence
                    event.kind = .faultEnded(mark)
                default: break
                }
            }
            if event.connection != 0 {
                event.connection += ConnectionID(next.agent) * connectionStride
            } else {
                switch event.kind {
                case .faultStarted(let mark), .faultEnded(let mark):
                    guard occurrences == nil else { break }
                    let started = if case .faultStarted = event.kind { true } else { false }
                    guard runWideMarks.insert("\(started) \(mark.occurrence) \(mark.kind)").inserted else { continue }
                case .stopping:
                    // The first agent to stop ends the run: its pair is being stopped.
                    guard !stopped else { continue }
                    stopped = true
                default: break
                }
            }
            switch event.kind {
            case .read where !audits, .written where !audits: continue
            default: engine.ingest(event)
            }
        }
    }

    /// The merged report's inputs: the agents' counts summed, their facts labelled by agent.
    static func inputs(
        _ agents: [Agent],
        audit: AuditResult,
        base: Int64,
        clocks: [AgentClockState],
        command: String,
        schedule: OwnTimelines? = nil
    ) -> ReportInputs {
        let first = agents[0]
        let reports = agents.compactMap(\.report)
        var faultConnections: [Int: Int] = [:]
        for (index, agent) in agents.enumerated() {
            for fault in agent.report?.faults ?? [] {
                let occurrence = schedule.map { $0.occurrences[index][fault.occurrence] ?? fault.occurrence } ?? fault.occurrence
                faultConnections[occurrence, default: 0] += fault.connections
            }
        }
        let connections =
            reports.count == agents.count
            ? ConnectionCounts(
                opened: reports.map(\.connections.opened).reduce(0, +),
                cutByFault: reports.map(\.connections.cutByFault).reduce(0, +),
                refused: reports.map(\.connections.refused).reduce(0, +)
            ) : nil
        var pairExits: [String: Int32]?
        var extra: [String: String] = ["merge.agents": agents.map(\.name).joined(separator: ", ")]
        var errors: [String] = []
        var elapsed: Int64 = 0
        for (agent, clock) in zip(agents, clocks) {
            let header = agent.reader.header
            let prefix = "merge.agent.\(agent.name)"
            extra["\(prefix).folder"] = agent.folder
            extra["\(prefix).clock_offset_ms"] = String(format: "%.3f", Double(clock.offsetNs) / 1e6)
            extra["\(prefix).clock_offset_from"] = clock.source
            extra["\(prefix).clock"] =
                header.clockSynchronized == true
                ? "synchronised, estimated error \(header.clockErrorUs ?? 0) µs"
                : header.clockSynchronized == false ? "not synchronised" : "unknown"
            if agent.reader.firstSegment > 0 {
                errors.append(
                    "agent '\(agent.name)': its first \(agent.reader.firstSegment) event segment(s) were removed by its ring, "
                        + "so the run's start cannot be judged (give the agents a larger --event-ring)"
                )
            }
            guard let report = agent.report else {
                errors.append("agent '\(agent.name)' (\(agent.folder)) has no report.json: it did not finish")
                continue
            }
            elapsed = max(elapsed, Int64(report.elapsedS * 1e9) + agent.shift)
            if report.verdict == .error, let reason = report.verdictReason { errors.append("agent '\(agent.name)': \(reason)") }
            for (name, status) in report.pairExits ?? [:] {
                pairExits = pairExits ?? [:]
                pairExits?[agents.count == 1 ? name : "\(agent.name)/\(name)"] = status
            }
            if agents.count == 1 { extra.merge(report.extra ?? [:]) { current, _ in current } }
        }
        // Two agents' timestamps, corrected, may still be apart by both clocks' remaining errors.
        let residual = clocks.map(\.residualNs).max() ?? 0
        extra["merge.ordering_bound_ms"] = String(format: "%.3f", Double(2 * residual) / 1e6)
        let backpressure = reports.compactMap(\.auditBackpressureS).max()
        var inputs = ReportInputs(
            scenario: first.scenario.name,
            seed: first.reader.header.seed,
            startedAt: Date(timeIntervalSince1970: Double(base) / 1e9),
            elapsed: .nanoseconds(elapsed),
            complete: reports.count == agents.count && reports.allSatisfy(\.complete),
            timeline: schedule?.timeline ?? first.timeline,
            audit: audit,
            expectations: first.scenario.expectations,
            replay: command,
            planned: first.timeline.duration,
            connections: connections,
            faultConnections: faultConnections,
            pairExits: pairExits,
            errorReason: errors.isEmpty ? nil : errors.joined(separator: "; "),
            extra: extra,
            auditBackpressureS: backpressure,
            faultAgents: agents.map(\.name),
            faultAgentByOccurrence: schedule?.agentOf
        )
        // The merged fleet judged nothing if no agent's connections carried an audited message.
        if first.scenario.protocolSpec != nil { inputs.scope = JudgedScope(auditsMessages: true) }
        return inputs
    }
}
