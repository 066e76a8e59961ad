import ChaosAudit
import ChaosCore
import ChaosProxy
import ChaosTLSDecryption
import Foundation
import Glibc
import Synchronization

/// The proxies' one event sink during a run. The relay threads hand events to a bounded ``AuditQueue``; the audit
/// engine (and any extra consumers, such as the capture writer) take them on a thread of their own, in the order
/// they were handed over. The relay never waits for the audit while the audit keeps up; when it cannot, the full
/// queue holds the relay back (never unbounded memory) and the time it did is the report's `audit_backpressure_s`.
final class RunSink: TrafficEventSink {
    private struct State {
        var engine: AuditEngine
        var consumers: [@Sendable (TrafficEvent) -> Void] = []
        /// With `transport: quic`: what turns the UDP flows' datagrams into their QUIC streams' events for the engine.
        var quic: QUICStreamEvents?
    }

    /// The engine and consumers, shared with the audit's thread.
    private final class Shared: Sendable {
        // Sendable: the non-Sendable engine lives inside the Mutex and is only reached through it.
        let state: Mutex<State>
        init(_ state: sending State) { self.state = Mutex(state) }
    }

    /// The audit thread's nice value: below the relay and the pair under test, so that on a loaded machine the audit,
    /// not the pair, waits (the pair is what the run measures).
    static let niceness: Int32 = 5

    /// How many bytes of events may wait for the audit by default (a few hundred milliseconds of a fast pair).
    static let defaultCapacity = 64 << 20

    private let shared: Shared
    private let queue: AuditQueue
    private let audits: Bool
    private let hasConsumers = Atomic(false)
    private let finished = Mutex<AuditResult?>(nil)

    /// A sink feeding `engine`; with `audits` false (no protocol), bytes are not framed, only connections seen.
    /// `capacity`: the bytes of events that may wait for the audit. `slowdown`: a pause per event on the audit's
    /// thread (tests only: an audit deliberately slower than the relay).
    /// `quic`: the QUIC streams' events, with `transport: quic` (the engine gets those; consumers get the datagrams).
    init(
        engine: sending AuditEngine,
        audits: Bool,
        capacity: Int = RunSink.defaultCapacity,
        slowdown: Duration? = nil,
        quic: sending QUICStreamEvents? = nil
    ) {
        let shared = Shared(State(engine: engine, quic: quic))
        let queue = AuditQueue(capacity: capacity)
        self.shared = shared
        self.queue = queue
        self.audits = audits
        let pause = slowdown.map { UInt32(clamping: $0.components.attoseconds / 1_000_000_000_000 + $0.components.seconds * 1_000_000) }
        let thread = Thread {
            // Named from inside (a Linux thread starts with its creator's name), and yielding to the pair and the
            // relay on a busy machine: the queue takes up the difference and holds the relay back only when full.
            Thread.current.name = "chaos-audit"
            // Linux keeps a nice value per thread: `who` 0 is this thread alone.
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Self.niceness)
            while let batch = queue.take() {
                shared.state.withLock { state in
                    for event in batch {
                        switch event.kind {
                        case .read where !audits, .written where !audits: break
                        default:
                            if let quic = state.quic {
                                for streamEvent in quic.transform(event) { state.engine.ingest(streamEvent) }
                            } else {
                                state.engine.ingest(event)
                            }
                        }
                        for consumer in state.consumers { consumer(event) }
                        if let pause { usleep(pause) }
                    }
                }
                queue.done(batch.count)
            }
        }
        thread.start()
    }

    /// `CHAOS_AUDIT_QUEUE_BYTES`: the bytes of events that may wait for the audit (default ``defaultCapacity``).
    static var capacityFromEnvironment: Int {
        ProcessInfo.processInfo.environment["CHAOS_AUDIT_QUEUE_BYTES"].flatMap { Int($0) }.map { max($0, 4_096) } ?? defaultCapacity
    }

    /// `CHAOS_TEST_AUDIT_SLOWDOWN_US`: a test hook that makes the audit pause that many microseconds per event.
    static var slowdownFromEnvironment: Duration? {
        ProcessInfo.processInfo.environment["CHAOS_TEST_AUDIT_SLOWDOWN_US"].flatMap { Int($0) }.map { .microseconds(min(max($0, 0), 1_000_000)) }
    }

    /// Adds a consumer that gets every event after the audit.
    func add(_ consumer: @escaping @Sendable (TrafficEvent) -> Void) {
        shared.state.withLock { $0.consumers.append(consumer) }
        hasConsumers.store(true, ordering: .relaxed)
    }

    func record(_ event: TrafficEvent) {
        queue.append(event)
    }

    /// Bytes matter to the audit (with a protocol) and to consumers such as the capture writer.
    var recordsTraffic: Bool { audits || hasConsumers.load(ordering: .relaxed) }

    /// With `transport: quic`: the QUIC packets opened so far, those that could not be, and the first reasons why, and
    /// what the connections' paths did (changes, migrations, the stall; ``QUICPathSummary/facts``): `quic.*` in the
    /// report's `extra`; empty otherwise.
    var quicFacts: [String: String] {
        shared.state.withLock { state in
            guard let quic = state.quic else { return [:] }
            var facts = ["quic.packets_opened": "\(quic.packetsOpened)", "quic.packets_unopened": "\(quic.packetsUnopened)"]
            if !quic.firstProblems.isEmpty { facts["quic.problems"] = quic.firstProblems.joined(separator: "; ") }
            facts.merge(quic.paths.facts) { $1 }
            return facts
        }
    }

    /// The delivery totals so far (cheap, and as far as the audit has got: for progress lines).
    func totals() -> DeliveryCounts? { audits ? shared.state.withLock { $0.engine.totalsSoFar() } : nil }

    /// The recovery and transit histograms so far (for `/metrics`).
    func histograms() -> AuditMetrics.Histograms {
        shared.state.withLock { state in
            let recovery = state.engine.recoveryHistograms()
            return AuditMetrics.Histograms(reconnect: recovery.reconnect, resume: recovery.resume, transit: state.engine.transitHistogram())
        }
    }

    /// The audit so far (for checkpoints), once it has taken every event recorded before.
    func snapshot() -> AuditResult {
        queue.waitUntilTaken()
        return shared.state.withLock { $0.engine.snapshot() }
    }

    /// How long the relay waited for the audit, in seconds, and the most bytes of events that waited for it.
    var backpressure: (seconds: Double, peakBytes: Int) { queue.backpressure }

    /// Ends the audit once it has taken every event: in-flight messages count as lost, partial frames as truncated.
    func finish() -> AuditResult {
        if let result = finished.withLock({ $0 }) { return result }
        queue.waitUntilTaken()
        queue.close()
        let result = shared.state.withLock { $0.engine.finish() }
        finished.withLock { $0 = result }
        return result
    }
}
