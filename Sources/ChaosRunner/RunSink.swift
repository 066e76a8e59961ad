import ChaosAudit
import ChaosCore
import ChaosProxy
import Synchronization

/// The proxies' one event sink during a run: feeds the audit engine (and any extra consumers, such
/// as the capture writer) inline under one lock, so events reach them in time order and a slow
/// consumer slows the proxy instead of filling a queue.
final class RunSink: TrafficEventSink {
    private struct State {
        var engine: AuditEngine
        var consumers: [@Sendable (TrafficEvent) -> Void] = []
        var lastTime: Int64 = 0
        var messages: Int64 = 0
    }

    // Sendable: the non-Sendable engine lives inside the Mutex and is only reached through it.
    private let state: Mutex<State>

    private let audits: Bool

    /// A sink feeding `engine`; with `audits` false (no protocol), bytes are not framed, only connections seen.
    init(engine: sending AuditEngine, audits: Bool) {
        state = Mutex(State(engine: engine))
        self.audits = audits
    }

    /// Adds a consumer that gets every event after the audit.
    func add(_ consumer: @escaping @Sendable (TrafficEvent) -> Void) {
        state.withLock { $0.consumers.append(consumer) }
    }

    func record(_ event: TrafficEvent) {
        state.withLock { state in
            var event = event
            // Events from several event loops race to the lock by microseconds; keep time monotonic.
            if event.time < state.lastTime { event.time = state.lastTime } else { state.lastTime = event.time }
            switch event.kind {
            case .read where !audits, .written where !audits: break
            default: state.engine.ingest(event)
            }
            for consumer in state.consumers { consumer(event) }
        }
    }

    /// Bytes matter to the audit (with a protocol) and to consumers such as the capture writer.
    var recordsTraffic: Bool { audits || state.withLock { !$0.consumers.isEmpty } }

    /// The delivery totals so far (cheap: for progress lines).
    func totals() -> DeliveryCounts? { audits ? state.withLock { $0.engine.totalsSoFar() } : nil }

    /// The recovery histograms so far (for `/metrics`).
    func recoveryHistograms() -> (reconnect: DurationHistogram, resume: DurationHistogram) {
        state.withLock { $0.engine.recoveryHistograms() }
    }

    /// The audit so far (for checkpoints).
    func snapshot() -> AuditResult { state.withLock { $0.engine.snapshot() } }

    /// Ends the audit: in-flight messages count as lost, partial frames as truncated.
    func finish() -> AuditResult { state.withLock { $0.engine.finish() } }
}
