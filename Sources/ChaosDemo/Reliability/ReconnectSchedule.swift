package import ChaosCore

/// Why a connection ended or could not be made; it decides the next reconnect delay.
package enum DisconnectReason: String, Hashable, Sendable {
    /// The peer (or a handoff) reset the connection: ECONNRESET / EPIPE.
    case reset
    /// The peer closed the connection in order (FIN).
    case closed
    /// The heartbeat went unanswered: the connection was half-open.
    case heartbeatTimeout = "heartbeat-timeout"
    /// The connection attempt failed (refused, unreachable, timed out).
    case connectFailed = "connect-failed"
    /// This side stopped on purpose.
    case stopped
}

/// The reconnect delays of the resilient client: full-jitter exponential backoff over consecutive
/// failures, from the first retry on (AWS's "Exponential Backoff And Jitter": a delay drawn in
/// 0 … min(cap, base · 2ⁿ)). Clients cut together (a server restart, a mass disconnect) so spread out
/// instead of coming back as a thundering herd. An immediate retry is only right when the client's own
/// network changed, which only its operating system can tell it; behind chaos it never can.
package struct ReconnectSchedule: Sendable {
    /// The backoff policy of every retry.
    package let policy: BackoffPolicy
    /// Consecutive retries since the last successful (resumed) connection.
    package private(set) var failures = 0
    private var generator: SeededGenerator

    /// A schedule drawing its jitter from `generator`.
    package init(policy: BackoffPolicy, generator: SeededGenerator) {
        self.policy = policy
        self.generator = generator
    }

    /// The delay before the next attempt, after the connection (or attempt) ended for `reason`.
    package mutating func nextDelay(after reason: DisconnectReason) -> ChaosDuration {
        defer { failures += 1 }
        return policy.delay(afterFailures: failures, using: &generator)
    }

    /// Call when a connection was established and resumed: the next failure starts from the base again.
    package mutating func connectionSucceeded() { failures = 0 }
}
