import ChaosCore
import ChaosProtocols
import Synchronization
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// The fault injector in virtual time: every occurrence lands at exactly its time, in the timeline's
/// order, however loaded the machine is.
@Suite("Fault injector in virtual time")
struct FaultInjectorTests {
    /// Time that a sleep moves forward at once; past `limit`, a sleep throws as a cancelled task's does.
    final class VirtualClock: FaultClock {
        private let time = Mutex<Int64>(0)
        let limit: Int64

        init(limit: Int64 = .max) { self.limit = limit }

        func now() -> Int64 { time.withLock { $0 } }

        func sleep(until target: Int64) async throws {
            guard target <= limit else { throw CancellationError() }
            time.withLock { $0 = max($0, target) }
            await Task.yield()
        }
    }

    /// A proxy stand-in that writes down what it was asked, and when (virtual milliseconds).
    final class RecordingTarget: FaultTarget {
        var connectionsOpened: Int64 { 0 }
        let clock: any FaultClock
        private let calls = Mutex<[String]>([])
        init(clock: any FaultClock) { self.clock = clock }

        var log: [String] { calls.withLock { $0 } }
        private func note(_ what: String) { calls.withLock { $0.append("\(clock.now() / 1_000_000) \(what)") } }

        var name: String { "p" }
        var liveConnections: [ConnectionID] { [1, 2, 3] }
        func pickTargets(_ targets: Targets, seed: UInt64) -> [ConnectionID] {
            var generator = SeededGenerator(seed: seed)
            return targets.pick(from: liveConnections, using: &generator)
        }
        func disconnect(_ ids: [ConnectionID]?, mode: DisconnectMode, linger: ChaosDuration) async -> Int {
            note("disconnect \(mode.rawValue) \(ids.map { $0.map(String.init).joined(separator: ",") } ?? "all")")
            return ids?.count ?? 3
        }
        func addShaping(_ effect: FaultEffect, key: ShapingKey, to ids: [ConnectionID]?, draw: ConnectionDraw?) async -> Int {
            let reached = draw.map { draw in liveConnections.filter(draw.reaches) } ?? ids ?? liveConnections
            note("shape #\(key.occurrence) \(effect.kind.rawValue)" + (draw.map { " each \($0.probability)" } ?? ""))
            return reached.count
        }
        func removeShaping(key: ShapingKey) async { note("lift #\(key.occurrence)") }
        func protocolClose(_ ids: [ConnectionID]?, _ fault: ProtocolFault) async -> Int {
            note("\(fault.kind) \(FaultEffect.protocolFault(fault).summary)")
            return ids?.count ?? 3
        }
        func beginRefusing() async { note("refuse") }
        func endRefusing() async { note("accept") }
        func beginHandshakeFault(_ mode: HandshakeMode) { note("handshake \(mode.rawValue)") }
        func endHandshakeFault(_ mode: HandshakeMode) { note("handshakes \(mode.rawValue) over") }
        func setBaseline(_ profile: LinkProfile?) { note("baseline \(profile?.name ?? "none")") }
        func changeSourceAddress(pool: [String]) -> String? {
            note("source \(pool.first ?? "none")")
            return pool.first
        }
        func rebindFlows(_ ids: [ConnectionID]?) async -> Int {
            note("rebind \(ids.map { $0.map(String.init).joined(separator: ",") } ?? "all")")
            return ids?.count ?? 3
        }
    }

    static func timeline(_ faults: String, duration: String = "5s") throws -> Timeline {
        let scenario = try Scenario.parse(
            yaml: """
                name: injector
                duration: \(duration)
                proxies:
                  - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
                faults:
                \(faults)
                """,
            file: "injector.yaml"
        )
        return Timeline(scenario: scenario, seed: 1)
    }

    @Test("each occurrence begins and ends at exactly its time; at the same time, ends come first, then starts in timeline order")
    func exactTimesAndOrder() async throws {
        let timeline = try Self.timeline(
            """
              - latency: {at: 1s, for: 2s, add: 50ms}
              - disconnect: {every: 500ms, until: 2s}
              - refuse: {at: 2s, for: 1s}
              - handoff: {at: 3s, blackout: 300ms, from: wifi, to: lte, linger: 1s}
            """
        )
        let clock = VirtualClock()
        let target = RecordingTarget(clock: clock)
        let injector = FaultInjector(timeline: timeline, proxies: [target], clock: clock, sink: nil)
        await injector.run()
        #expect(
            target.log == [
                "500 disconnect reset all",
                "1000 shape #1 latency", "1000 disconnect reset all",
                "1500 disconnect reset all",
                "2000 refuse",
                "3000 lift #1", "3000 accept", "3000 shape #5 handoff",
                "3300 disconnect client-only 1,2,3", "3300 baseline lte", "3300 rebind 1,2,3", "3300 lift #5",
            ],
            "\(target.log)"
        )
        #expect(injector.appliedSoFar.map(\.appliedAt) == [500, 1000, 1000, 1500, 2000, 3000].map { Int64($0) * 1_000_000 })
    }

    @Test("a timeline of a fault every millisecond for ten years is applied as time reaches it: 10,000 in 10 virtual seconds")
    func lazyDecade() async throws {
        let timeline = try Self.timeline("  - disconnect: {every: 1ms}", duration: "3650d")
        let clock = VirtualClock(limit: 10_000_000_000)
        let target = RecordingTarget(clock: clock)
        let injector = FaultInjector(timeline: timeline, proxies: [target], clock: clock, sink: nil)
        await injector.run()
        #expect(injector.appliedSoFar.count == 10_000)
        #expect(injector.appliedSoFar.last?.appliedAt == 10_000_000_000)
    }

    @Test("stopping the injector lifts what is still on")
    func cancellationLiftsActiveFaults() async throws {
        let timeline = try Self.timeline("  - partition: {at: 1s, for: 10s}\n  - refuse: {at: 2s, for: 10s}", duration: "20s")
        let clock = VirtualClock(limit: 3_000_000_000)
        let target = RecordingTarget(clock: clock)
        await FaultInjector(timeline: timeline, proxies: [target], clock: clock, sink: nil).run()
        #expect(target.log == ["1000 shape #0 partition", "2000 refuse", "2000 lift #0", "2000 accept"])
    }

    @Test("a fault aimed at some connections names them in its mark (count, fraction: the picked ids; each: the draw); one on all names none")
    func marksNameTheirTargets() async throws {
        let effect = FaultEffect.partition(direction: .both)
        let cases: [(Targets, (FaultMark) -> Bool)] = [
            (.count(2), { $0.connections?.count == 2 && $0.draw == nil }),
            (.fraction(0.3), { $0.connections?.count == 1 && $0.draw == nil }),
            (.each(0.5), { $0.connections == nil && $0.draw == ConnectionDraw(probability: 0.5, seed: 9) }),
            (.all, { $0.connections == nil && $0.draw == nil }),
        ]
        for (targets, named) in cases {
            let clock = VirtualClock()
            let target = RecordingTarget(clock: clock)
            let events = EventRecorder()
            let injector = FaultInjector(number: 0, proxies: [target], clock: clock, sink: events)
            let occurrence = FaultOccurrence(index: 0, rule: 0, at: .zero, lasts: .zero, proxy: nil, targets: targets, seed: 9, effect: effect)
            let applied = await injector.apply(occurrence)
            let started = events.all.compactMap { if case .faultStarted(let mark) = $0.kind { mark } else { nil } }
            #expect(started.count == 1 && started.allSatisfy(named), "\(targets): \(started)")
            // The mark reaches what the fault hit.
            #expect(target.liveConnections.filter { started.first?.reaches($0) == true }.count == applied.connections, "\(targets)")
        }
    }

    @Test("a toxic is applied and lifted by the same injector, on the connections its toxicity draws (the same seed, the same ones)")
    func toxicAsOccurrence() async throws {
        let clock = VirtualClock()
        var toxic = ToxicTests.toxic("reset_peer") { $0.timeout = 20 }
        toxic.toxicity = 0.5
        let occurrence = try #require(toxic.occurrence(proxy: "p", seed: 3))
        let draw = ConnectionDraw(probability: 0.5, seed: 3)
        for _ in 0..<2 {
            let target = RecordingTarget(clock: clock)
            let injector = FaultInjector(number: 7, proxies: [target], clock: clock, sink: nil)
            let applied = await injector.apply(occurrence)
            #expect(applied.connections == target.liveConnections.filter(draw.reaches).count)
            await injector.lift(occurrence)
            #expect(target.log == ["0 shape #0 reset_peer each 0.5", "0 lift #0"])
        }
        // On a proxy of another name, it does nothing.
        let elsewhere = FaultOccurrence(
            index: 0,
            rule: 0,
            at: .zero,
            lasts: .zero,
            proxy: "q",
            targets: .each(1),
            seed: 3,
            effect: occurrence.effect
        )
        let target = RecordingTarget(clock: clock)
        #expect(await FaultInjector(number: 7, proxies: [target], clock: clock, sink: nil).apply(elsewhere).connections == 0)
        #expect(target.log.isEmpty)
    }
}
