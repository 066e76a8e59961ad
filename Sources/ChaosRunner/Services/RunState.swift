import ChaosControl
import ChaosCore
import ChaosProxy
import ServiceLifecycle
import Synchronization

/// What the services of one run share: the pair once it started, whether the timeline ran to its end,
/// and the moment the pair is up (when the fault schedule may begin).
final class RunState: Sendable {
    private let state = Mutex<(pair: PairSupervisor?, pairStarted: Bool, ranToEnd: Bool, stopping: Bool)>((nil, false, false, false))
    private let started: AsyncStream<Void>
    private let startedContinuation: AsyncStream<Void>.Continuation

    init() {
        (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    /// The pair's supervisor, once started (nil for a run without a pair).
    var pair: PairSupervisor? { state.withLock { $0.pair } }

    /// Whether the timeline ran to its planned end (false: a signal or a failure ended the run first).
    var ranToEnd: Bool { state.withLock { $0.ranToEnd } }

    /// The pair is up (or there is none): the fault schedule may begin.
    func pairStarted(_ pair: PairSupervisor?) {
        state.withLock {
            $0.pair = pair
            $0.pairStarted = true
        }
        startedContinuation.finish()
    }

    /// Waits until ``pairStarted(_:)`` or the end of the run; returns whether the pair started.
    func waitForPair() async -> Bool {
        for await _ in started.cancelOnGracefulShutdown() {}
        return state.withLock { $0.pairStarted }
    }

    /// The timeline ran to its planned end.
    func markRanToEnd() { state.withLock { $0.ranToEnd = true } }

    /// Marks the run as stopping; true the first time only.
    func beginStopping() -> Bool {
        state.withLock { state in
            defer { state.stopping = true }
            return !state.stopping
        }
    }
}

/// A `restart` fault acts on the pair's server, through its supervisor once the pair started.
extension RunState: PairFaultTarget {
    func stopServer(_ signal: RestartSignal) async -> Bool {
        await pair?.stopServer(signal) ?? false
    }

    func startServer() async {
        await pair?.startServer()
    }
}
