public import ChaosCore
public import ChaosProxy
import Foundation
public import Logging
import NIOCore
import NIOPosix

/// `chaos run`: starts the scenario's proxies, applies the fault timeline for the run's duration,
/// stops cleanly on SIGINT/SIGTERM, and reports what it applied and moved.
public final class ScenarioRunner: Sendable {
    /// What a finished run did.
    public struct Outcome: Sendable {
        /// Whether it ended early on a signal.
        public var interrupted: Bool
        /// Nanoseconds it ran.
        public var elapsed: Int64
        /// The occurrences applied, in order.
        public var applied: [FaultInjector.Applied]
        /// Bytes moved per proxy: (name, upstream, downstream, connections).
        public var traffic: [(proxy: String, upstream: Int64, downstream: Int64, connections: Int64, cut: Int64)]
    }

    private let scenario: Scenario
    private let timeline: Timeline
    private let logger: Logger
    private let output: @Sendable (String) -> Void

    /// A runner for `scenario` applying `timeline`; `output` receives human-readable lines.
    public init(scenario: Scenario, timeline: Timeline, logger: Logger = Logger(label: "chaos.run"),
                output: @escaping @Sendable (String) -> Void = { print($0) }) {
        self.scenario = scenario
        self.timeline = timeline
        self.logger = logger
        self.output = output
    }

    /// Runs to the end of the timeline or the first SIGINT/SIGTERM.
    public func run() async throws -> Outcome {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, System.coreCount))
        let clock = RunClock()
        let ids = ConnectionIDSource()
        let root = SeededGenerator(seed: timeline.seed)
        var proxies: [ProxyServer] = []
        for spec in scenario.proxies {
            let proxy = ProxyServer(spec: spec, group: group, sink: nil, clock: clock, ids: ids,
                                    seed: root.fork("proxy:" + spec.name), baseline: scenario.baseline, logger: logger)
            do {
                try await proxy.start()
            } catch let error as ChaosError {
                for started in proxies { await started.stop() }
                try? await group.shutdownGracefully()
                throw ChaosError(.badInput, error.message + " (is the port in use?)")
            }
            proxies.append(proxy)
            output("proxy \(spec.name): listening on \(proxy.boundAddress.map { "\($0)" } ?? "\(spec.listen)") -> \(spec.upstream)")
        }
        let output = self.output
        let injector = FaultInjector(timeline: timeline, proxies: proxies, clock: clock, sink: nil, logger: logger) { occurrence, applied in
            output("\(Timeline.clock(.nanoseconds(applied.appliedAt)))  \(occurrence.kind.rawValue) "
                + "\(occurrence.effect.summary) -> \(applied.connections) connection(s)")
        }
        output("running \(scenario.name) for \(timeline.duration) with seed \(timeline.seed) "
            + "(\(timeline.occurrences.count) fault occurrences); Ctrl-C stops")
        let signals = SignalWatcher()
        let faults = Task { await injector.run() }
        let interrupted = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(max(0, self.timeline.duration.nanoseconds)))
                return false
            }
            group.addTask { await signals.next() != nil }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        signals.cancel()
        faults.cancel()
        await faults.value
        for proxy in proxies { await proxy.stop() }
        try? await group.shutdownGracefully()
        let traffic = proxies.map {
            (proxy: $0.spec.name, upstream: $0.counters.upstream, downstream: $0.counters.downstream,
             connections: $0.counters.opened, cut: $0.counters.cutByFault)
        }
        return Outcome(interrupted: interrupted, elapsed: clock.now(), applied: injector.appliedSoFar, traffic: traffic)
    }
}
