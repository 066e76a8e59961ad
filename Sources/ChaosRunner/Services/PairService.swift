import ChaosProxy
import ServiceLifecycle

/// The scenario's `pair:`: the server, its readiness check, then the clients; stopped (SIGTERM, then
/// SIGKILL after the grace time) when the run shuts down. A pair that cannot start fails the run.
struct PairService: Service {
    let supervisor: PairSupervisor?
    let state: RunState
    let output: @Sendable (String) -> Void

    func run() async throws {
        guard let supervisor else {
            state.pairStarted(nil)
            try? await gracefulShutdown()
            return
        }
        do {
            // A signal while the server gets ready ends the start-up with an error: the run cannot be judged.
            try await supervisor.start(interrupted: { Task.isShuttingDownGracefully || Task.isCancelled })
        } catch {
            await uncancelled { await supervisor.stop() }
            throw error
        }
        for member in supervisor.members { output("started \(member.name) (pid \(member.pid)): \(member.command)") }
        state.pairStarted(supervisor)
        try? await gracefulShutdown()
        await uncancelled { await supervisor.stop() }
    }
}
