package import ChaosCore

/// The pair's processes, for a fault that acts on them rather than on the proxies' connections (`restart`): `chaos
/// run` gives its pair's supervisor; a run without a pair gives none, and such a fault is refused before it is drawn.
package protocol PairFaultTarget: Sendable {
    /// Stops the pair's server with `signal` (SIGTERM, then SIGKILL after its `stop_grace`; or SIGKILL at once) and
    /// waits until it has exited; returns whether one was running.
    func stopServer(_ signal: RestartSignal) async -> Bool
    /// Starts the pair's server again with its own command; its readiness is waited for in the background (the
    /// fault schedule goes on meanwhile, as the clients' reconnects do).
    func startServer() async
}
