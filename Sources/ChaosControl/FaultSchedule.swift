package import ChaosCore
package import ChaosProxy
import Synchronization

/// A run's fault schedule as a person pauses and resumes it while it runs (the live page, `POST /schedule/pause`
/// and `POST /schedule/resume`), or as a replay pauses it where the run it replays was paused. While paused, no
/// occurrence begins; what is on ends when it was planned to. After a pause, every occurrence not yet begun begins
/// later by the pause's length (``SchedulePauses``). Times are on the timeline's clock: the run clock less the
/// timeline's origin, which ``FaultInjector/run(from:)`` sets.
package final class FaultSchedule: Sendable {
    private struct State {
        var origin: Int64 = 0
        /// The pauses that ended (or, on a replay, all of them).
        var done: SchedulePauses
        /// When the pause under way began (a live pause).
        var pausedSince: ChaosDuration?
    }

    private let clock: any FaultClock
    private let state: Mutex<State>
    /// Whether the pauses were planned (a replay's): then nobody pauses it by hand.
    package let planned: Bool

    /// A schedule on `clock`, with the pauses a replayed run had (none: a live one, paused by hand).
    package init(clock: any FaultClock, planned pauses: SchedulePauses = .none) {
        self.clock = clock
        self.planned = !pauses.isEmpty
        state = Mutex(State(done: pauses))
    }

    /// Where the timeline's zero is on the run clock (set once the timeline starts).
    func start(origin: Int64) { state.withLock { $0.origin = origin } }

    /// Now on the timeline's clock.
    package var now: ChaosDuration {
        let origin = state.withLock { $0.origin }
        return .nanoseconds(clock.now() - origin)
    }

    /// Why the schedule cannot be paused or resumed now, or nil.
    package enum Refusal: Error, Equatable {
        /// A replay follows the pauses of the run it replays.
        case planned
        /// Paused already (pause), or not paused (resume).
        case already(paused: Bool)
    }

    /// Pauses the schedule now; returns when, on the timeline's clock.
    package func pause() throws(Refusal) -> ChaosDuration {
        guard !planned else { throw .planned }
        let now = self.now
        return try state.withLock { state throws(Refusal) in
            guard state.pausedSince == nil else { throw .already(paused: true) }
            // A pause begins after the last one ended (the clock moves on).
            let begins = max(now, state.done.spans.last?.end ?? .zero)
            state.pausedSince = begins
            return begins
        }
    }

    /// Resumes the schedule; returns the pause that ended.
    package func resume() throws(Refusal) -> SchedulePauses.Span {
        guard !planned else { throw .planned }
        let now = self.now
        return try state.withLock { state throws(Refusal) in
            guard let since = state.pausedSince else { throw .already(paused: false) }
            let span = SchedulePauses.Span(at: since, lasts: max(.zero, now - since))
            state.done.append(span)
            state.pausedSince = nil
            return span
        }
    }

    /// Whether no occurrence may begin at `time` (the timeline's clock): a pause is under way.
    func isPaused(at time: ChaosDuration) -> Bool {
        state.withLock { state in
            if state.pausedSince != nil { return true }
            return state.done.spans.contains { $0.at <= time && time < $0.end }
        }
    }

    /// Whether a person has paused it and not resumed it yet.
    package var isPausedByHand: Bool { state.withLock { $0.pausedSince != nil } }

    /// The pauses until `time`: those that ended, and the one under way as if it ended then. What timeline.json and
    /// the report record.
    package func pauses(through time: ChaosDuration) -> SchedulePauses {
        state.withLock { state in
            var pauses = state.done
            if let since = state.pausedSince { pauses.append(.init(at: since, lasts: max(.zero, time - since))) }
            return pauses
        }
    }

    /// When an occurrence planned at `at` begins, if nothing more is paused after `time`.
    func begin(ofPlanned at: ChaosDuration, now time: ChaosDuration) -> ChaosDuration {
        pauses(through: time).begin(ofPlanned: at)
    }
}
