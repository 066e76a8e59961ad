import ChaosAudit
import ChaosCapture
package import ChaosControl
package import ChaosCore
package import ChaosProtocols
import ChaosProxy
import ChaosReport
package import Foundation
package import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `chaos run`: starts the scenario's proxies and pair, applies the fault timeline for the run's
/// duration while the audit watches every byte, checkpoints the report every minute, stops cleanly
/// on SIGINT/SIGTERM, and writes the final report.
///
/// The long-running parts are services of one `ServiceGroup` (swift-service-lifecycle): the proxies,
/// the pair, the control API, the checkpoint writer and the fault schedule. The schedule ends the run
/// when its time is up; SIGINT or SIGTERM ends it early; either way the group shuts down in reverse
/// order (faults lifted, checkpoints stopped, API closed, pair stopped, proxies stopped) and the final
/// report is written. A service that fails (a pair that cannot start) cancels the others.
package final class ScenarioRunner: Sendable {
    /// How to run.
    package struct Configuration: Sendable {
        /// The scenario (with overrides applied).
        package var scenario: Scenario
        /// The timeline to apply (drawn from the seed, or an earlier run's for replay).
        package var timeline: Timeline
        /// `--out`: the run folder; nil: `Reports/<scenario>-<UTC time>/`.
        package var out: String?
        /// The command that reproduces this run, for the report.
        package var replayCommand: String
        /// This executable, for pair commands that start with `chaos`.
        package var selfPath: String
        /// Whether to write a run folder and reports (false for the bare `chaos proxy`).
        package var writesReports = true
        /// How long, after the last fault is lifted, in-flight messages get to arrive before the pair stops.
        package var drain: ChaosDuration = .seconds(Int64(3))
        /// `--capture`: write capture.pcap whatever the scenario says (nil: as the scenario says).
        package var capture: Bool?
        /// Where to serve the HTTP control API (`chaos proxy --api`); nil: none.
        package var controlAPI: HostPort?
        /// Who may use it: open on loopback, a bearer token elsewhere.
        package var apiAccess = APIAccess.open
        /// Proxies that start disabled (refusing connections) until the control API enables them.
        package var disabledProxies: Set<String> = []
        /// How long the proxy's event loops keep polling after relaying bytes (zero: off); see ``BusyPolling``.
        package var busyPoll: ChaosDuration = .microseconds(100)
        /// Whether connections that nothing shapes are relayed by epoll relay threads rather than
        /// NIO (see ``EpollRelayLoopGroup``); a shaping fault moves a connection to NIO when it reaches it.
        package var epollRelay = true
        /// The plug-in whose frames the proxies follow, so that its faults (from the control API) can reach
        /// connections; nil: the one the scenario's faults need, if any.
        package var frames: (any ProtocolPlugin.Type)?
        /// How often report.json is checkpointed.
        package var checkpointEvery: ChaosDuration = .seconds(Int64(60))
        /// `--agent`: this run is one agent of a fleet, writing its traffic events to `events.bin` for
        /// `chaos report --merge`; nil: a run on its own.
        package var agent: String?
        /// `--start-at`: the wall-clock moment the run's clock starts (the fleet's agents share it, so a shared
        /// schedule strikes every agent at once); nil: now.
        package var startAt: Date?
        /// The most bytes the agent's event ring may hold.
        package var eventRingBytes = EventFileWriter.defaultRingBytes
        /// `--hold`: once the run is over, an agent keeps serving its events and report on the control API until
        /// SIGTERM (a merge fetches them from it; Kubernetes does not restart a finished run).
        package var hold = false
        /// `--peer`: the fleet's other agents' control APIs, which the live page links to.
        package var fleetPeers: [String] = []
        /// The fleet's seed (the scenario's), which an agent's events.bin carries; nil: the timeline's.
        package var fleetSeed: UInt64?

        /// Creates a configuration.
        package init(scenario: Scenario, timeline: Timeline, out: String? = nil, replayCommand: String, selfPath: String) {
            self.scenario = scenario
            self.timeline = timeline
            self.out = out
            self.replayCommand = replayCommand
            self.selfPath = selfPath
        }
    }

    /// What a finished run did.
    package struct Outcome: Sendable {
        /// Whether it ended early on a signal.
        package var interrupted: Bool
        /// Nanoseconds it ran.
        package var elapsed: Int64
        /// The occurrences applied, in order.
        package var applied: [FaultInjector.Applied]
        /// Bytes moved per proxy.
        package var traffic: [(proxy: String, upstream: Int64, downstream: Int64, connections: Int64, cut: Int64)]
        /// The run folder, when reports were written.
        package var folder: URL?
        /// The verdict: `pass`, `fail`, `inconclusive` or `error`.
        package var verdict: String
        /// The process exit code for the verdict: 0 pass, 1 fail or inconclusive, 2 error.
        package var exitCode: Int32
        /// Why the verdict is not `pass` (its first reason).
        package var verdictReason: String? = nil
    }

    let configuration: Configuration
    let logger: Logger
    let output: @Sendable (String) -> Void

    /// A runner; `output` receives human-readable lines.
    package init(
        configuration: Configuration,
        logger: Logger = Logger(label: "chaos.run"),
        output: @escaping @Sendable (String) -> Void = { print($0) }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.output = output
    }

    /// Runs to the end of the timeline or the first SIGINT/SIGTERM.
    package func run() async throws -> Outcome {
        let scenario = configuration.scenario
        let timeline = configuration.timeline
        let folder = configuration.writesReports ? try RunFolder(scenario: scenario.name, out: configuration.out) : nil
        try folder?.saveReplayInputs(scenario: scenario, timeline: timeline)
        let startedAt = Date()
        // Without a protocol there is nothing to audit: the engine then only counts connections.
        let engine = try AuditEngine(spec: scenario.protocolSpec ?? ProtocolSpec())
        engine.pathLimits = scenario.pathLimits
        let sink = RunSink(
            engine: engine,
            audits: scenario.protocolSpec != nil,
            capacity: RunSink.capacityFromEnvironment,
            slowdown: RunSink.slowdownFromEnvironment,
            quic: Self.quicStreams(scenario.protocolSpec)
        )
        let capture = try startCapture(folder: folder, startedAt: startedAt, sink: sink)
        // With neither a report nor a capture (the bare `chaos proxy`), nothing reads the events:
        // the proxies then send none, and spend nothing per connection on them.
        let eventSink = folder != nil || capture != nil || scenario.protocolSpec != nil ? sink : nil
        let zero = try await clockZero()
        let loops = try await RelayLoops.start(busyPoll: configuration.busyPoll, epollRelay: configuration.epollRelay)
        let clock = RunClock(start: zero.deadline)
        let agent = try folder.flatMap { folder in
            try configuration.agent.map { name in
                try AgentRecorder(
                    folder: folder.url.path,
                    agent: name,
                    scenario: scenario,
                    timeline: timeline,
                    fleetSeed: configuration.fleetSeed ?? timeline.seed,
                    clockZero: zero.date,
                    ringBytes: configuration.eventRingBytes
                )
            }
        }
        if let agent { sink.add { agent.record($0) } }
        let keyLog = try folder.flatMap { folder in try scenario.proxies.contains { $0.tls != nil } ? KeyLogFile(folder: folder.url) : nil }
        defer { keyLog?.close() }
        let factory = proxyFactory(loops: loops, clock: clock, sink: eventSink, keyLog: keyLog)
        let proxies: [ProxyServer]
        do {
            proxies = try await startProxies(factory: factory)
        } catch {
            await loops.stop()
            throw error
        }
        let output = self.output
        // Where a dead path's bytes stop, found out (and a killed chaos's rules removed) before the first fault.
        let deadPath = scenario.mayKillPaths || configuration.controlAPI != nil
        if deadPath { _ = KernelDeadPath.shared.availability }
        let state = RunState()
        // The schedule can be paused through the control API (the live page), and a replay pauses where its run did.
        let schedule = configuration.controlAPI != nil || !timeline.pauses.isEmpty ? FaultSchedule(clock: clock, planned: timeline.pauses) : nil
        let manual = ManualActions(clock: clock)
        let faultTally = FaultTally()
        let injector = FaultInjector(
            timeline: timeline,
            proxies: proxies,
            clock: clock,
            sink: eventSink,
            logger: logger,
            pair: state,
            schedule: schedule,
            tally: faultTally
        ) {
            occurrence,
            applied in
            output(
                "\(Timeline.clock(.nanoseconds(applied.appliedAt)))  \(occurrence.kind.rawValue) "
                    + "\(occurrence.effect.summary) -> \(applied.connections) connection(s)"
            )
        }
        let agentFacts = Mutex<[String: String]>([:])
        let report = { @Sendable [self] (audit: AuditResult, complete: Bool, elapsed: Int64, interrupted: Bool, error: String?) in
            makeReport(
                audit: audit,
                complete: complete,
                elapsed: elapsed,
                startedAt: startedAt,
                injector: injector,
                proxies: proxies,
                pair: state.pair,
                interrupted: interrupted,
                startupError: error,
                auditQueue: sink.backpressure,
                agentFacts: agentFacts.withLock { $0 }.merging(sink.quicFacts) { _, quic in quic },
                manual: manual
            )
        }
        let checkpoint = folder.map { folder in
            { @Sendable (now: Int64) in
                do {
                    try report(sink.snapshot(), false, now, false, nil).writeCheckpoint(toDirectory: folder.url.path)
                } catch {
                    self.logger.warning("checkpoint failed", metadata: ["error": "\(error)"])
                }
            }
        }
        let begin = { @Sendable in
            output(
                "running \(scenario.name) for \(timeline.duration) with seed \(timeline.seed) "
                    + "(\(timeline.count())); Ctrl-C stops"
            )
            if let folder { output("run folder: \(folder.url.path)") }
            if deadPath { output("dead path: \(KernelDeadPath.shared.summary)") }
            // A first checkpoint at once: even a run killed in its first minute leaves a report.json.
            checkpoint?(clock.now())
        }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: ProxiesService(proxies: proxies), serviceName: "proxies"),
            .init(
                service: PairService(
                    supervisor: makePair(proxies: proxies, folder: folder, clock: clock),
                    state: state,
                    output: output
                ),
                serviceName: "pair"
            ),
        ]
        // POST /stop: the group is shut down as a signal would.
        let stopSwitch = Mutex<ServiceGroup?>(nil)
        if let address = configuration.controlAPI {
            var extras = ControlAPI.Extras()
            extras.faults = faultTally
            if scenario.protocolSpec != nil {
                // The live audit: what a checkpoint would write now, and its figures on /metrics.
                extras.report = {
                    let now = report(sink.snapshot(), false, clock.now(), false, nil)
                    return ((try? now.jsonData()).map { String(decoding: $0, as: UTF8.self) } ?? "{}") + "\n"
                }
                extras.metrics = { AuditMetrics.text(sink.snapshot(), histograms: sink.histograms()) }
            }
            if agent != nil, let folder {
                extras.agentFolder = folder.url.path
                extras.agentFinished = { false }
            }
            extras.runLength = timeline.duration
            let live = LiveView(
                report: { report(sink.snapshot(), false, clock.now(), false, nil) },
                injector: injector,
                proxies: proxies,
                manual: manual,
                peers: configuration.fleetPeers
            )
            extras.liveState = { live.state() }
            extras.liveStreams = { live.streams(page: $0, search: $1) }
            extras.schedule = schedule
            extras.manual = manual
            extras.stop = { await stopSwitch.withLock { $0 }?.triggerGracefulShutdown() }
            extras.fleetPeers = configuration.fleetPeers
            let api = ControlAPI(proxies: proxies, factory: factory, seed: timeline.seed, extras: extras, access: configuration.apiAccess)
            services.append(.init(service: ControlAPIService(api: api, address: address, output: output), serviceName: "control API"))
        }
        services.append(
            .init(
                service: CheckpointService(
                    clock: clock,
                    every: configuration.checkpointEvery.nanoseconds,
                    progress: ProgressReporter(planned: timeline.duration, output: output),
                    sink: sink,
                    injector: injector,
                    capture: capture,
                    checkpoint: checkpoint
                ),
                serviceName: "checkpoints"
            )
        )
        let stopping = { @Sendable in
            if state.beginStopping() { sink.record(TrafficEvent(time: clock.now(), connection: 0, kind: .stopping)) }
        }
        services.append(
            .init(
                service: FaultScheduleService(
                    state: state,
                    injector: injector,
                    duration: timeline.duration,
                    drain: configuration.drain,
                    clock: clock,
                    // A fleet's agents share one zero (`--start-at`), and the merge places their timelines on it.
                    startsWhenPairIsUp: scenario.pair?.client?.ready == ProcessSpec.connectedCheck && configuration.agent == nil
                        && configuration.startAt == nil,
                    begin: begin,
                    stopping: stopping
                ),
                successTerminationBehavior: .gracefullyShutdownGroup,
                serviceName: "fault schedule"
            )
        )
        var groupConfiguration = ServiceGroupConfiguration(services: services, logger: logger)
        groupConfiguration.gracefulShutdownSignals = [.sigint, .sigterm]
        var failure: (any Error)?
        let group = ServiceGroup(configuration: groupConfiguration)
        stopSwitch.withLock { $0 = group }
        do { try await group.run() } catch { failure = error }

        stopping()  // when the group ended without its schedule (a failure)
        let elapsed = clock.now()
        await loops.stop()
        if let capture {
            do { try capture.close() } catch { output("capture: \(error)") }
            output("capture: \(capture.paths.joined(separator: ", ")) (\(capture.statistics.packets) packets)")
        }
        let audited = sink.finish()
        // Where the schedule was paused, timeline.json says when, so that a replay pauses there too.
        if let schedule, !schedule.planned, let folder {
            var paused = timeline
            paused.pauses = schedule.pauses(through: .nanoseconds(elapsed - injector.timelineOrigin))
            if !paused.pauses.isEmpty { try? folder.saveTimeline(paused) }
        }
        if let agent { agentFacts.withLock { $0 = agent.close() } }
        if let failure {
            // The run cannot be judged: leave a report that says why (verdict error), then fail with exit 2.
            if let folder { try? report(audited, true, elapsed, false, "\(failure)").write(toDirectory: folder.url.path) }
            throw failure
        }
        let interrupted = !state.ranToEnd
        let traffic = proxies.map {
            (
                proxy: $0.spec.name, upstream: $0.counters.upstream, downstream: $0.counters.downstream,
                connections: $0.counters.opened, cut: $0.counters.cutByFault
            )
        }
        var verdict = "pass"
        var exitCode: Int32 = 0
        var verdictReason: String?
        if let folder {
            let final = report(audited, true, elapsed, interrupted, nil)
            try final.write(toDirectory: folder.url.path)
            verdict = final.verdict.rawValue
            verdictReason = final.verdictReason
            exitCode = verdict == "pass" ? 0 : verdict == "fail" || verdict == "inconclusive" ? 1 : 2
        }
        // A run ended by a signal is not held: the signal was meant for the agent as a whole.
        if configuration.hold, !interrupted, agent != nil, let folder, let address = configuration.controlAPI {
            try await hold(folder: folder, address: address, seed: timeline.seed)
        }
        return Outcome(
            interrupted: interrupted,
            elapsed: elapsed,
            applied: injector.appliedSoFar,
            traffic: traffic,
            folder: folder?.url,
            verdict: verdict,
            exitCode: exitCode,
            verdictReason: verdictReason
        )
    }
}

extension ScenarioRunner {
    /// The run clock's zero: now, or `--start-at` (waited for). Returns it as a deadline and as a wall-clock date.
    func clockZero() async throws -> (deadline: NIODeadline, date: Date) {
        guard let startAt = configuration.startAt else { return (.now(), Date()) }
        let wait = startAt.timeIntervalSinceNow
        if wait > 0 {
            output("waiting \(String(format: "%.1f", wait)) s for --start-at \(startAt.ISO8601Format())")
        } else if wait < -1 {
            output(
                "--start-at \(startAt.ISO8601Format()) was \(String(format: "%.1f", -wait)) s ago: "
                    + "this agent's timeline is late by as much"
            )
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(max(wait, 0) * 1e9))
        if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
        return (deadline, wait > 0 ? startAt : Date())
    }
}

extension ScenarioRunner {
    /// `--hold`: serves the finished agent's events, run files and final report on the control API (no proxies: the
    /// run is over) until SIGINT or SIGTERM.
    func hold(folder: RunFolder, address: HostPort, seed: UInt64) async throws {
        var extras = ControlAPI.Extras()
        extras.agentFolder = folder.url.path
        extras.agentFinished = { true }
        let reportPath = folder.url.appendingPathComponent("report.json").path
        extras.report = { (FileManager.default.contents(atPath: reportPath)).map { String(decoding: $0, as: UTF8.self) } ?? "{}" }
        let factory = ProxyFactory(group: MultiThreadedEventLoopGroup.singleton, sink: nil, clock: RunClock(), seed: SeededGenerator(seed: seed))
        let api = ControlAPI(proxies: [], factory: factory, seed: seed, extras: extras, access: configuration.apiAccess)
        output("holding: the run is over; its events and report stay on the control API until SIGTERM")
        var group = ServiceGroupConfiguration(
            services: [.init(service: ControlAPIService(api: api, address: address, output: output))],
            logger: logger
        )
        group.gracefulShutdownSignals = [.sigint, .sigterm]
        try await ServiceGroup(configuration: group).run()
    }
}
