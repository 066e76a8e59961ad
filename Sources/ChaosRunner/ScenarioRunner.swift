import ChaosAudit
import ChaosCapture
public import ChaosCore
public import ChaosProxy
import ChaosReport
public import Foundation
public import Logging
import NIOCore
import NIOPosix

/// `chaos run`: starts the scenario's proxies and pair, applies the fault timeline for the run's
/// duration while the audit watches every byte, checkpoints the report every minute, stops cleanly
/// on SIGINT/SIGTERM, and writes the final report.
public final class ScenarioRunner: Sendable {
    /// How to run.
    public struct Configuration: Sendable {
        /// The scenario (with overrides applied).
        public var scenario: Scenario
        /// The timeline to apply (drawn from the seed, or an earlier run's for replay).
        public var timeline: Timeline
        /// `--out`: the run folder; nil: `Reports/<scenario>-<UTC time>/`.
        public var out: String?
        /// The command that reproduces this run, for the report.
        public var replayCommand: String
        /// This executable, for pair commands that start with `chaos`.
        public var selfPath: String
        /// Whether to write a run folder and reports (false for the bare `chaos proxy`).
        public var writesReports = true
        /// How long, after the last fault is lifted, in-flight messages get to arrive before the pair stops.
        public var drain: ChaosDuration = .seconds(Int64(3))
        /// `--capture`: write capture.pcap whatever the scenario says (nil: as the scenario says).
        public var capture: Bool?
        /// Where to serve the HTTP control API (`chaos proxy --api`); nil: none.
        public var controlAPI: HostPort?
        /// How long the proxy's event loops keep polling after relaying bytes (zero: off); see ``BusyPolling``.
        public var busyPoll: ChaosDuration = .microseconds(100)
        /// Whether connections that nothing shapes are relayed by epoll relay threads rather than
        /// NIO (see ``EpollRelayLoopGroup``); a shaping fault moves a connection to NIO when it reaches it.
        public var epollRelay = true
        /// How often report.json is checkpointed.
        public var checkpointEvery: ChaosDuration = .seconds(Int64(60))

        /// Creates a configuration.
        public init(scenario: Scenario, timeline: Timeline, out: String? = nil, replayCommand: String, selfPath: String) {
            self.scenario = scenario
            self.timeline = timeline
            self.out = out
            self.replayCommand = replayCommand
            self.selfPath = selfPath
        }
    }

    /// What a finished run did.
    public struct Outcome: Sendable {
        /// Whether it ended early on a signal.
        public var interrupted: Bool
        /// Nanoseconds it ran.
        public var elapsed: Int64
        /// The occurrences applied, in order.
        public var applied: [FaultInjector.Applied]
        /// Bytes moved per proxy.
        public var traffic: [(proxy: String, upstream: Int64, downstream: Int64, connections: Int64, cut: Int64)]
        /// The run folder, when reports were written.
        public var folder: URL?
        /// The verdict: `pass`, `fail` or `error`.
        public var verdict: String
        /// The process exit code for the verdict: 0 pass, 1 fail, 2 error.
        public var exitCode: Int32
    }

    private let configuration: Configuration
    private let logger: Logger
    private let output: @Sendable (String) -> Void

    /// A runner; `output` receives human-readable lines.
    public init(configuration: Configuration, logger: Logger = Logger(label: "chaos.run"),
                output: @escaping @Sendable (String) -> Void = { print($0) }) {
        self.configuration = configuration
        self.logger = logger
        self.output = output
    }

    /// Runs to the end of the timeline or the first SIGINT/SIGTERM.
    public func run() async throws -> Outcome {
        let scenario = configuration.scenario, timeline = configuration.timeline
        let folder = configuration.writesReports ? try RunFolder(scenario: scenario.name, out: configuration.out) : nil
        try folder?.saveReplayInputs(scenario: scenario, timeline: timeline)
        let startedAt = Date()
        // Without a protocol there is nothing to audit: the engine then only counts connections.
        let sink = RunSink(engine: try AuditEngine(spec: scenario.protocolSpec ?? ProtocolSpec()),
                           audits: scenario.protocolSpec != nil)
        let capture = try startCapture(folder: folder, startedAt: startedAt, sink: sink)
        // With neither a report nor a capture (the bare `chaos proxy`), nothing reads the events:
        // the proxies then send none, and spend nothing per connection on them.
        let eventSink = folder != nil || capture != nil ? sink : nil
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, System.coreCount))
        let busyPolling = await BusyPolling.start(on: group, window: .nanoseconds(configuration.busyPoll.nanoseconds))
        let epollRelay: EpollRelayLoopGroup?
        do {
            epollRelay = configuration.epollRelay
                ? try EpollRelayLoopGroup(threads: System.coreCount, busyPoll: .nanoseconds(configuration.busyPoll.nanoseconds))
                : nil
        } catch {
            try? await group.shutdownGracefully()
            busyPolling?.close()
            throw ChaosError(.network, "cannot start the relay threads: \(error)")
        }
        @Sendable func stopLoops() async {
            epollRelay?.shutdown()
            try? await group.shutdownGracefully()
            busyPolling?.close()
        }
        let clock = RunClock()
        let proxies: [ProxyServer]
        do {
            proxies = try await startProxies(group: group, busyPolling: busyPolling, epollRelay: epollRelay,
                                             clock: clock, sink: eventSink)
        } catch {
            await stopLoops()
            throw error
        }
        let signals = SignalWatcher()
        let pair: PairSupervisor?
        do {
            pair = try await startPair(proxies: proxies, folder: folder, clock: clock, group: group, signals: signals)
        } catch {
            // The run cannot be judged: leave a report that says why (verdict error), then fail with exit 2.
            signals.cancel()
            await stopLoops()
            if let folder {
                let report = makeReport(audit: sink.finish(), complete: true, elapsed: clock.now(), startedAt: startedAt,
                                        injector: nil, proxies: proxies, pair: nil, startupError: "\(error)")
                try? report.write(toDirectory: folder.url.path)
            }
            throw error
        }
        var api: ControlAPI?
        if let address = configuration.controlAPI {
            let control = ControlAPI(proxies: proxies, group: group, seed: timeline.seed)
            do {
                output("control API: http://\(try await control.start(host: address.host, port: address.port))")
            } catch {
                for proxy in proxies { await proxy.stop() }
                await stopLoops()
                throw error
            }
            api = control
        }

        let output = self.output
        let injector = FaultInjector(timeline: timeline, proxies: proxies, clock: clock, sink: eventSink, logger: logger) { occurrence, applied in
            output("\(Timeline.clock(.nanoseconds(applied.appliedAt)))  \(occurrence.kind.rawValue) "
                + "\(occurrence.effect.summary) -> \(applied.connections) connection(s)")
        }
        output("running \(scenario.name) for \(timeline.duration) with seed \(timeline.seed) "
            + "(\(timeline.count())); Ctrl-C stops")
        if let folder { output("run folder: \(folder.url.path)") }
        if let folder {
            // A first checkpoint at once: even a run killed in its first minute leaves a report.json.
            try? makeReport(audit: sink.snapshot(), complete: false, elapsed: clock.now(), startedAt: startedAt,
                            injector: injector, proxies: proxies, pair: pair).writeCheckpoint(toDirectory: folder.url.path)
        }
        let faults = Task { await injector.run() }
        let progress = ProgressReporter(planned: timeline.duration, output: output)
        let checkpoints = Task { [self] in
            var lastCheckpoint = clock.now(), lastProgress = clock.now()
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 250_000_000)
                let now = clock.now()
                if Double(now - lastProgress) / 1e9 >= progress.interval {
                    lastProgress = now
                    let totals = sink.totals()
                    progress.update(progress.line(elapsed: now, faults: injector.appliedSoFar.count, totals: totals))
                    // Keep the capture ring around the first loss: later traffic must not push it out.
                    if let capture, let totals, totals.lost > 0 || totals.gaps > 0 { capture.freeze() }
                }
                if let folder, now - lastCheckpoint >= configuration.checkpointEvery.nanoseconds {
                    lastCheckpoint = now
                    let report = makeReport(audit: sink.snapshot(), complete: false, elapsed: now, startedAt: startedAt,
                                            injector: injector, proxies: proxies, pair: pair)
                    do { try report.writeCheckpoint(toDirectory: folder.url.path) } catch {
                        logger.warning("checkpoint failed", metadata: ["error": "\(error)"])
                    }
                    // Building and encoding a report churns the heap; hand the freed pages back so that a
                    // 72-hour soak's RSS shows what it holds, not what malloc kept from checkpoints.
                    ReleaseFreedMemory.now()
                }
            }
        }
        let interrupted = await waitForEnd(signals: signals)
        faults.cancel()
        await faults.value
        if !interrupted {
            // Faults are lifted: give messages still in flight a moment to arrive before the pair stops.
            try? await Task.sleep(nanoseconds: UInt64(configuration.drain.nanoseconds))
        }
        checkpoints.cancel()
        await checkpoints.value
        progress.finish()
        signals.cancel()
        sink.record(TrafficEvent(time: clock.now(), connection: 0, kind: .stopping))
        await api?.stop()
        await pair?.stop()
        for proxy in proxies { await proxy.stop() }
        let elapsed = clock.now()
        await stopLoops()
        if let capture {
            do { try capture.close() } catch { output("capture: \(error)") }
            output("capture: \(capture.paths.joined(separator: ", ")) (\(capture.statistics.packets) packets)")
        }

        let traffic = proxies.map {
            (proxy: $0.spec.name, upstream: $0.counters.upstream, downstream: $0.counters.downstream,
             connections: $0.counters.opened, cut: $0.counters.cutByFault)
        }
        var verdict = "pass", exitCode: Int32 = 0
        if let folder {
            let report = makeReport(audit: sink.finish(), complete: true, elapsed: elapsed, startedAt: startedAt,
                                    injector: injector, proxies: proxies, pair: pair, interrupted: interrupted)
            try report.write(toDirectory: folder.url.path)
            verdict = report.verdict.rawValue
            exitCode = verdict == "pass" ? 0 : verdict == "fail" ? 1 : 2
        }
        return Outcome(interrupted: interrupted, elapsed: elapsed, applied: injector.appliedSoFar, traffic: traffic,
                       folder: folder?.url, verdict: verdict, exitCode: exitCode)
    }

    private func startCapture(folder: RunFolder?, startedAt: Date, sink: RunSink) throws -> CaptureWriter? {
        let scenario = configuration.scenario
        guard let folder, configuration.capture ?? scenario.capture?.enabled ?? false else { return nil }
        let writer = try CaptureWriter(directory: folder.url.path, ringBytes: scenario.capture?.ringBytes.map { Int($0) },
                                       startedAt: startedAt.timeIntervalSince1970)
        sink.add { writer.record($0) }
        return writer
    }

    private func startProxies(group: any EventLoopGroup, busyPolling: BusyPolling?, epollRelay: EpollRelayLoopGroup?, clock: RunClock,
                              sink: RunSink?) async throws -> [ProxyServer] {
        let scenario = configuration.scenario
        let ids = ConnectionIDSource()
        let root = SeededGenerator(seed: configuration.timeline.seed)
        var proxies: [ProxyServer] = []
        var options = ProxyServer.Options()
        options.busyPolling = busyPolling
        options.epollRelay = epollRelay
        for spec in scenario.proxies {
            let proxy = ProxyServer(spec: spec, group: group, sink: sink, clock: clock, ids: ids,
                                    seed: root.fork("proxy:" + spec.name), baseline: scenario.baseline,
                                    options: options, logger: logger)
            do {
                try await proxy.start()
            } catch let error as ChaosError {
                for started in proxies { await started.stop() }
                throw ChaosError(.badInput, error.message + " (is the port in use?)")
            }
            proxies.append(proxy)
            output("proxy \(spec.name): listening on \(proxy.boundAddress.map(\.hostPort) ?? "\(spec.listen)") -> \(spec.upstream)")
        }
        return proxies
    }

    private func startPair(proxies: [ProxyServer], folder: RunFolder?, clock: RunClock, group: any EventLoopGroup,
                           signals: SignalWatcher) async throws -> PairSupervisor? {
        guard let pairSpec = configuration.scenario.pair, let first = proxies.first else { return nil }
        let directory = folder?.url ?? FileManager.default.temporaryDirectory.appendingPathComponent("chaos-pair-\(getpid())")
        let values = [
            "listen.port": "\(first.boundAddress?.port ?? first.spec.listen.port)", "listen.host": first.spec.listen.host,
            "upstream.port": "\(first.spec.upstream.port)", "upstream.host": first.spec.upstream.host,
            "run_dir": directory.path, "seed": "\(configuration.timeline.seed)",
        ]
        let pair = PairSupervisor(pair: pairSpec, values: values, directory: directory, selfPath: configuration.selfPath,
                                  now: { clock.now() })
        do {
            try await pair.start(interrupted: { signals.received })
        } catch {
            await pair.stop()
            for proxy in proxies { await proxy.stop() }
            throw error
        }
        for member in pair.members { output("started \(member.name) (pid \(member.pid)): \(member.command)") }
        return pair
    }

    private func waitForEnd(signals: SignalWatcher) async -> Bool {
        let duration = configuration.timeline.duration
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(max(0, duration.nanoseconds)))
                return false
            }
            group.addTask { await signals.next() != nil }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    private func makeReport(audit: AuditResult, complete: Bool, elapsed: Int64, startedAt: Date, injector: FaultInjector?,
                            proxies: [ProxyServer], pair: PairSupervisor?, interrupted: Bool = false,
                            startupError: String? = nil) -> RunReport {
        let scenario = configuration.scenario
        var faultConnections: [Int: Int] = [:]
        for applied in injector?.appliedSoFar ?? [] { faultConnections[applied.occurrence] = applied.connections }
        let connections = ConnectionCounts(
            opened: proxies.map(\.counters.opened).reduce(0, +), cutByFault: proxies.map(\.counters.cutByFault).reduce(0, +),
            refused: proxies.map(\.counters.upstreamFailures).reduce(0, +))
        var pairExits: [String: Int32]?
        var errorReason = startupError.map { "the run could not start: \($0)" }
        if let pair {
            pairExits = Dictionary(pair.exits.map { ($0.name, $0.status) }, uniquingKeysWith: { first, _ in first })
            let unexpected = pair.exits.filter(\.unexpected)
            if !unexpected.isEmpty {
                errorReason = "pair process(es) exited during the run: "
                    + unexpected.map { "\($0.name) with status \($0.status) at \(Timeline.clock(.nanoseconds($0.at)))" }
                    .joined(separator: ", ")
            }
        }
        var extra: [String: String] = [:]
        if interrupted { extra["interrupted"] = "stopped by SIGINT/SIGTERM before the planned end" }
        for proxy in proxies {
            extra["proxy.\(proxy.spec.name).bytes_upstream"] = "\(proxy.counters.upstream)"
            extra["proxy.\(proxy.spec.name).bytes_downstream"] = "\(proxy.counters.downstream)"
        }
        if scenario.protocolSpec == nil, errorReason == nil, !scenario.expectations.isEmpty {
            errorReason = "the scenario has expectations but no protocol: section, so messages could not be audited"
        }
        return RunReport(ReportInputs(
            scenario: scenario.name, seed: configuration.timeline.seed, startedAt: startedAt,
            elapsed: .nanoseconds(elapsed), complete: complete, timeline: configuration.timeline, audit: audit,
            expectations: scenario.expectations, replay: configuration.replayCommand, planned: configuration.timeline.duration,
            connections: connections, faultConnections: faultConnections, pairExits: pairExits,
            errorReason: errorReason, extra: extra))
    }
}
