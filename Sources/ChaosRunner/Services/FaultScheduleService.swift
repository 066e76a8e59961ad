import ChaosControl
import ChaosCore
import ChaosProxy
import ServiceLifecycle

/// The run's clock: once the pair is up, applies the fault timeline for the planned duration, lifts the
/// faults, gives messages in flight the drain time to arrive, and returns, which shuts the group down
/// gracefully. A signal ends it at once (no drain).
struct FaultScheduleService: Service {
    let state: RunState
    let injector: FaultInjector
    let duration: ChaosDuration
    let drain: ChaosDuration
    /// The run's clock, and whether the timeline's zero is the moment the pair is up (its clients connected, when
    /// the scenario's client says `ready: connected`) rather than the clock's own zero.
    let clock: RunClock
    let startsWhenPairIsUp: Bool
    /// Called once the pair is up, before the first fault (the banner and the first checkpoint).
    let begin: @Sendable () -> Void
    /// Called as the schedule ends, however it ends: the run is stopping. This service is the first the group
    /// shuts down, so this comes before the pair and the proxies close anything (the audit must not take
    /// those closes for a fault's).
    let stopping: @Sendable () -> Void

    func run() async throws {
        defer { stopping() }
        guard await state.waitForPair() else { return }
        let origin = startsWhenPairIsUp ? clock.now() : 0
        begin()
        let faults = Task { [injector] in await injector.run(from: origin) }
        let ranToEnd: Bool
        do {
            try await cancelWhenGracefulShutdown { try await Task.sleep(nanoseconds: UInt64(max(0, duration.nanoseconds))) }
            ranToEnd = true
        } catch {
            ranToEnd = false
        }
        faults.cancel()
        await faults.value
        guard ranToEnd else { return }
        state.markRanToEnd()
        // Faults are lifted: give messages still in flight a moment to arrive before the pair stops.
        try? await cancelWhenGracefulShutdown { try await Task.sleep(nanoseconds: UInt64(max(0, drain.nanoseconds))) }
    }
}
