package import ChaosCore
import Synchronization

/// One cellular radio's RRC state (``RadioModel``): when the last byte crossed it and until when a promotion runs.
/// Shared by every connection of a proxy (the phone behind it), so it is locked; a `per: connection` radio is a
/// connection's own.
package final class RadioClock: Sendable {
    private struct State {
        /// When the last byte crossed (nanoseconds); nil: the radio has not been watched yet (taken as connected).
        var lastByte: Int64?
        /// When the running promotion ends (nanoseconds).
        var promotedAt: Int64 = .min
    }

    private let state = Mutex(State())

    /// A radio not yet watched.
    package init() {}

    /// When a byte that comes at `now` can cross under `model`: at once while the radio is connected, else once a
    /// promotion ends (the one this byte starts when the radio has been idle for `tail`). Each byte keeps it connected.
    package func admit(at now: Int64, _ model: RadioModel) -> Int64 {
        state.withLock { state in
            if now < state.promotedAt {
                return state.promotedAt
            }
            if let last = state.lastByte, now - last > model.tail.nanoseconds {
                state.promotedAt = now.saturatingAdding(model.promotion.nanoseconds)
                state.lastByte = state.promotedAt
                return state.promotedAt
            }
            state.lastByte = max(state.lastByte ?? now, now)
            return now
        }
    }
}
