import ChaosCore
import Dispatch
import Synchronization
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// An injector behind its timeline shares its executor: the control API's answers and every other task of the
/// shared pool run between the occurrences it catches up on.
@Suite("Fault injector behind its timeline")
struct FaultInjectorFairnessTests {
    /// One serial queue as a task executor: what runs on it runs one job at a time, in the order enqueued.
    final class QueueExecutor: TaskExecutor {
        let queue = DispatchQueue(label: "chaos.test.one-thread")

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    /// A run an hour old whatever the timeline says: every occurrence is overdue, and a sleep returns at once.
    final class LateClock: FaultClock {
        func now() -> Int64 { 3_600_000_000_000 }
        func sleep(until time: Int64) async throws { try Task.checkCancellation() }
    }

    @Test("9,999 overdue occurrences of a fault every millisecond: a task queued behind the injector runs after its first, not its last")
    func overdueOccurrencesYield() async throws {
        let timeline = try FaultInjectorTests.timeline("  - latency: {every: 1ms, for: 1ms, add: 1ms}", duration: "10s")
        let clock = LateClock()
        let target = FaultInjectorTests.RecordingTarget(clock: clock)
        let injector = FaultInjector(timeline: timeline, proxies: [target], clock: clock, sink: nil)
        let executor = QueueExecutor()
        // Both are queued before either runs: the injector first, the other task behind it (as a request's handler
        // is behind an injector on the pool's thread).
        executor.queue.suspend()
        let applying = Task(executorPreference: executor) { await injector.run() }
        let behind = Task(executorPreference: executor) { injector.appliedSoFar.count }
        executor.queue.resume()
        let seen = await behind.value
        await applying.value
        #expect(injector.appliedSoFar.count == timeline.reduce(0) { count, _ in count + 1 }, "every overdue occurrence is still applied")
        #expect(injector.appliedSoFar.count > 9_000)
        #expect(seen < 10, "the task behind the injector ran after \(seen) occurrences")
    }
}
