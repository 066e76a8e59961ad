import ChaosAudit
import ChaosControl
import ChaosCore
import ChaosProxy
import ChaosReport
import Foundation

/// The run's report, as a checkpoint or final.
extension ScenarioRunner {
    func makeReport(
        audit: AuditResult,
        complete: Bool,
        elapsed: Int64,
        startedAt: Date,
        injector: FaultInjector?,
        proxies: [ProxyServer],
        pair: PairSupervisor?,
        interrupted: Bool = false,
        startupError: String? = nil,
        auditQueue: (seconds: Double, peakBytes: Int)? = nil,
        agentFacts: [String: String] = [:],
        manual: ManualActions? = nil
    ) -> RunReport {
        let scenario = configuration.scenario
        var faultConnections: [Int: Int] = [:]
        var openedWhileOn: [Int: Int] = [:]
        for applied in injector?.appliedSoFar ?? [] {
            faultConnections[applied.occurrence] = applied.connections
            openedWhileOn[applied.occurrence] = applied.openedWhileOn
        }
        // A bare proxy driven by the control API has proxies that come and go: the audit saw all their connections.
        let bare = configuration.scenario.pair == nil && configuration.controlAPI != nil
        let connections =
            bare
            ? nil
            : ConnectionCounts(
                opened: proxies.map(\.counters.opened).reduce(0, +),
                cutByFault: proxies.map(\.counters.cutByFault).reduce(0, +),
                refused: proxies.map(\.counters.upstreamFailures).reduce(0, +)
            )
        var pairExits: [String: Int32]?
        var errorReason = startupError.map { "the run could not start: \($0)" }
        var pairExitedEarly: String?
        if let pair {
            pairExits = Dictionary(pair.exits.map { ($0.name, $0.status) }, uniquingKeysWith: { first, _ in first })
            let unexpected = pair.exits.filter(\.unexpected)
            if !unexpected.isEmpty {
                pairExitedEarly = unexpected.map { "\($0.name) with status \($0.status) at \(Timeline.clock(.nanoseconds($0.at)))" }
                    .joined(separator: ", ")
            }
        }
        var extra: [String: String] = [:]
        if interrupted { extra["interrupted"] = "stopped by SIGINT/SIGTERM before the planned end" }
        if let auditQueue { extra["audit.queue_peak_bytes"] = "\(auditQueue.peakBytes)" }
        if let agent = configuration.agent { extra["agent"] = agent }
        if scenario.mayKillPaths || KernelDeadPath.isInUse { extra["dead_path"] = KernelDeadPath.shared.summary }
        extra.merge(agentFacts) { _, new in new }
        for proxy in proxies {
            extra["proxy.\(proxy.spec.name).bytes_upstream"] = "\(proxy.counters.upstream)"
            extra["proxy.\(proxy.spec.name).bytes_downstream"] = "\(proxy.counters.downstream)"
            guard proxy.spec.transport == .udp else { continue }
            extra["proxy.\(proxy.spec.name).datagrams"] = "\(proxy.counters.datagrams)"
            extra["proxy.\(proxy.spec.name).flows_rebound"] = "\(proxy.counters.flowsRebound)"
            for (reason, count) in proxy.counters.datagramsDropped {
                extra["proxy.\(proxy.spec.name).datagrams_dropped.\(reason.rawValue)"] = "\(count)"
            }
            for (what, count) in proxy.counters.datagramsAltered {
                extra["proxy.\(proxy.spec.name).datagrams_\(what == .duplicated ? "duplicated" : "held_back")"] = "\(count)"
            }
        }
        if scenario.protocolSpec == nil, errorReason == nil, !scenario.expectations.isEmpty {
            errorReason = "the scenario has expectations but no protocol: section, so messages could not be audited"
        }
        var inputs = ReportInputs(
            scenario: scenario.name,
            seed: configuration.timeline.seed,
            startedAt: startedAt,
            elapsed: .nanoseconds(elapsed),
            complete: complete,
            timeline: configuration.timeline,
            audit: audit,
            expectations: scenario.expectations,
            replay: configuration.replayCommand,
            planned: configuration.timeline.duration,
            connections: connections,
            faultConnections: faultConnections,
            pairExits: pairExits,
            errorReason: errorReason,
            extra: extra,
            auditBackpressureS: auditQueue?.seconds,
            faultAgents: configuration.agent.map { [$0] }
        )
        inputs.faultOpenedWhileOn = openedWhileOn
        // A run that could not start is an error whatever the pair did.
        if errorReason == nil { inputs.pairExitedEarly = pairExitedEarly }
        if !bare, scenario.pair != nil || scenario.protocolSpec != nil {
            inputs.scope = JudgedScope(
                auditsMessages: scenario.protocolSpec != nil,
                idleProxies: proxies.filter { $0.counters.opened == 0 && $0.counters.upstreamFailures == 0 }
                    .map { "'\($0.spec.name)' (listen \($0.spec.listen))" },
                defaultFloor: scenario.pair.map { Int64($0.client?.count ?? 0) }.flatMap { $0 > 0 ? $0 : nil }
            )
        }
        if let origin = injector?.timelineOrigin, origin > 0 {
            inputs.timelineOrigin = .nanoseconds(origin)
            inputs.extra?["timeline.origin_s"] = String(format: "%.3f", Double(origin) / 1e9)
        }
        // Where the schedule was paused, its occurrences began later: the report places them then.
        if let schedule = injector?.schedule {
            inputs.timeline.pauses = schedule.pauses(through: .nanoseconds(elapsed - (injector?.timelineOrigin ?? 0)))
            if !inputs.timeline.pauses.isEmpty {
                inputs.extra?["schedule.paused_s"] = String(format: "%.3f", inputs.timeline.pauses.total.seconds)
            }
        }
        var report = RunReport(inputs)
        if let actions = manual?.all, !actions.isEmpty {
            report.manual = actions
            if let stop = actions.last(where: { $0.action == .stop }), interrupted {
                report.extra?["interrupted"] = String(
                    format: "stopped through the control API (POST /stop) at %.1f s, before the planned end",
                    stop.atS
                )
            }
        }
        return report
    }
}
