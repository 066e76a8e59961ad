import ChaosCore
import Synchronization
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// The fault injector under a paused schedule, in virtual time: nothing begins while paused, what is on ends when it
/// was planned to, and what comes after begins later by the pause, the same whether the pause is made by hand (the
/// live page) or replayed from timeline.json.
@Suite("Fault injector: pausing the schedule")
struct FaultSchedulePauseTests {
    /// Virtual time that jumps to each sleep's end, and does what the script says when it reaches its times.
    final class ScriptedClock: FaultClock {
        private let time = Mutex<Int64>(0)
        private let script = Mutex<[(at: Int64, action: @Sendable () -> Void)]>([])
        let limit: Int64

        init(limit: Int64) { self.limit = limit }

        func at(_ seconds: Double, _ action: @escaping @Sendable () -> Void) {
            script.withLock {
                $0.append((Int64(seconds * 1e9), action))
                $0.sort { $0.at < $1.at }
            }
        }

        func now() -> Int64 { time.withLock { $0 } }

        func sleep(until target: Int64) async throws {
            guard target <= limit else { throw CancellationError() }
            // An action due before the target happens at its own time, as a person clicks while the injector sleeps.
            while let next = script.withLock({ $0.first }), next.at <= target {
                time.withLock { $0 = max($0, next.at) }
                _ = script.withLock { $0.removeFirst() }
                next.action()
            }
            time.withLock { $0 = max($0, target) }
            await Task.yield()
        }
    }

    static let faults = """
          - latency: {at: 1s, for: 4s, add: 50ms}
          - disconnect: {at: 3s}
          - refuse: {at: 6s, for: 1s}
        """

    /// What the injector did with a pause from 2 s to 5 s (the latency on since 1 s still ends at 5 s; the
    /// disconnect planned at 3 s and the refusal planned at 6 s come 3 s later).
    static let expected = [
        "1000 shape #0 latency", "5000 lift #0", "6000 disconnect reset all", "9000 refuse", "10000 accept",
    ]

    @Test("a pause from 2 s to 5 s made by hand: nothing begins meanwhile, the latency ends as planned, the rest comes 3 s later")
    func pausedByHand() async throws {
        let timeline = try FaultInjectorTests.timeline(Self.faults, duration: "12s")
        let clock = ScriptedClock(limit: 12_000_000_000)
        let target = FaultInjectorTests.RecordingTarget(clock: clock)
        let schedule = FaultSchedule(clock: clock)
        let injector = FaultInjector(timeline: timeline, proxies: [target], clock: clock, sink: nil, schedule: schedule)
        let upcoming = Mutex<[ChaosDuration?]>([])
        clock.at(2) { _ = try? schedule.pause() }
        clock.at(4) { upcoming.withLock { $0 = injector.upcoming(2).map(\.begins) } }
        clock.at(5) { _ = try? schedule.resume() }
        await injector.run()
        #expect(target.log == Self.expected, "\(target.log)")
        #expect(upcoming.withLock { $0 } == [nil, nil], "while paused the next ones have no time yet")
        #expect(schedule.pauses(through: .seconds(Int64(12))) == SchedulePauses(spans: [.init(at: .seconds(Int64(2)), lasts: .seconds(Int64(3)))]))
    }

    @Test("the same pause replayed from timeline.json: the same times; a replay is not paused by hand")
    func replayedPause() async throws {
        var timeline = try FaultInjectorTests.timeline(Self.faults, duration: "12s")
        timeline.pauses = SchedulePauses(spans: [.init(at: .seconds(Int64(2)), lasts: .seconds(Int64(3)))])
        let clock = ScriptedClock(limit: 12_000_000_000)
        let target = FaultInjectorTests.RecordingTarget(clock: clock)
        let schedule = FaultSchedule(clock: clock, planned: timeline.pauses)
        let injector = FaultInjector(timeline: timeline, proxies: [target], clock: clock, sink: nil, schedule: schedule)
        let upcoming = Mutex<[ChaosDuration?]>([])
        clock.at(1.5) { upcoming.withLock { $0 = injector.upcoming(2).map(\.begins) } }
        await injector.run()
        #expect(target.log == Self.expected, "\(target.log)")
        #expect(upcoming.withLock { $0 } == [.seconds(Int64(6)), .seconds(Int64(9))], "the next ones, after the planned pause")
        #expect(injector.appliedSoFar.map(\.appliedAt) == [1, 6, 9].map { Int64($0) * 1_000_000_000 })
        #expect(throws: FaultSchedule.Refusal.planned) { try schedule.pause() }
    }
}
