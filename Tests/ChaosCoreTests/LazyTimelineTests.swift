import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

/// The timeline is drawn lazily; these tests hold it to what the eager draw gave for every seed (so replays
/// and timelines of earlier runs stay valid) and to constant memory whatever the run's length and rate.
@Suite("Lazy timeline")
struct LazyTimelineTests {
    static let scenariosDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scenarios")

    @Test("every shipped scenario draws, seed for seed, what the eager draw gave")
    func shippedScenariosMatchTheEagerDraw() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.scenariosDirectory.path).filter { $0.hasSuffix(".yaml") }
        #expect(files.count >= 5)
        for file in files {
            let scenario = try Scenario.load(path: Self.scenariosDirectory.appendingPathComponent(file).path)
            for seed: UInt64 in [1, 42, 7_777, 123_456_789] {
                let lazy = Array(Timeline(scenario: scenario, seed: seed))
                let eager = EagerTimeline.draw(scenario: scenario, seed: seed, duration: scenario.duration)
                #expect(lazy == eager, "\(file) seed \(seed)")
            }
        }
    }

    @Test("random rule sets (windows, probabilities, once and repeating) draw what the eager draw gave")
    func randomRuleSetsMatchTheEagerDraw() throws {
        var random = SeededGenerator(seed: 2026)
        for round in 0..<150 {
            var rules: [String] = []
            for _ in 0...random.next(upperBound: 4) {
                let low = 1 + random.next(upperBound: 3_000)
                let high = low + random.next(upperBound: 3_000)
                let after = random.next(upperBound: 20)
                let until = after + 1 + random.next(upperBound: 60)
                let probability = [1.0, 0.5, 0.1, 0][Int(random.next(upperBound: 4))]
                switch random.next(upperBound: 5) {
                case 0: rules.append("  - disconnect: {every: \(low)ms..\(high)ms, after: \(after)s, until: \(until)s, probability: \(probability)}")
                case 1: rules.append("  - latency: {every: \(low)ms..\(high)ms, for: 100ms..2s, add: 10ms..90ms, probability: \(probability)}")
                case 2: rules.append("  - stall: {at: \(after)s..\(until)s, for: 1s}")
                case 3: rules.append("  - handoff: {every: \(low * 10)ms..\(high * 10)ms, blackout: 100ms..900ms, from: wifi, to: lte}")
                default: rules.append("  - partition: {after: \(after)s, for: 3s}")
                }
            }
            let scenario = try TimelineTests().scenario(rules.joined(separator: "\n"), duration: "\(30 + round)s")
            let seed = random.next()
            #expect(
                Array(Timeline(scenario: scenario, seed: seed))
                    == EagerTimeline.draw(scenario: scenario, seed: seed, duration: scenario.duration),
                "round \(round):\n\(rules.joined(separator: "\n"))"
            )
        }
    }

    @Test("many rules, ties among them: the heap of their next occurrences draws what the eager draw gave, ties in file order")
    func manyRulesMatchTheEagerDraw() throws {
        var random = SeededGenerator(seed: 41)
        var rules: [String] = []
        for index in 0..<600 {
            let at = random.next(upperBound: 40)  // whole seconds: many occurrences share a time
            switch index % 3 {
            case 0: rules.append("  - disconnect: {at: \(at)s}")
            case 1: rules.append("  - latency: {at: \(at)s, for: 1s, add: 1ms}")
            default: rules.append("  - stall: {every: \(1 + random.next(upperBound: 9))s, for: 100ms}")
            }
        }
        let scenario = try TimelineTests().scenario(rules.joined(separator: "\n"), duration: "45s")
        let lazy = Array(Timeline(scenario: scenario, seed: 9))
        #expect(lazy == EagerTimeline.draw(scenario: scenario, seed: 9, duration: scenario.duration))
        #expect(lazy.count > 1_000)
    }

    @Test("reading and drawing a scenario grow with its rules, not their square: 20,000 rules take about ten times 2,000")
    func validationScalesWithTheRules() throws {
        func yaml(_ count: Int) -> String {
            (0..<count).map { "  - latency: {at: \($0 % 3000)s, for: 1s, add: 1ms}" }.joined(separator: "\n")
        }
        func seconds(_ rules: String, count: Int) throws -> Double {
            let start = DispatchTime.now().uptimeNanoseconds
            let scenario = try TimelineTests().scenario(rules, duration: "1h")
            let drawn = Timeline(scenario: scenario, seed: 1).reduce(0) { total, _ in total + 1 }
            #expect(drawn == count)
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
        let (small, large) = (yaml(2_000), yaml(20_000))
        // Taken in turns, the best of three each: both sizes meet the same load on a shared machine.
        var best = (small: Double.infinity, large: Double.infinity)
        for _ in 0..<3 {
            best.small = min(best.small, try seconds(small, count: 2_000))
            best.large = min(best.large, try seconds(large, count: 20_000))
        }
        // Linear is 10x (a little more for the heap's log); scanning every rule per occurrence was 100x.
        #expect(best.large < 50 * best.small, "2,000 rules: \(best.small) s, 20,000: \(best.large) s")
    }

    @Test("ten years of a fault every millisecond: the first occurrences come at once and the count is a formula")
    func tenYearsEveryMillisecond() throws {
        let scenario = try TimelineTests().scenario(
            "  - disconnect: {every: 1ms..2ms}\n  - latency: {at: 5s, for: 1s, add: 1s}",
            duration: "3650d"
        )
        let timeline = Timeline(scenario: scenario, seed: 3)
        let first = timeline.lines(first: 50)
        #expect(first.count == 50)
        let count = timeline.count(upTo: 10_000)
        #expect(count.exact == nil)
        // 3650 days over a 1.5 ms mean gap, plus the one latency fault.
        #expect(abs(count.expected - (3650.0 * 86_400 / 0.0015 + 1)) < 1e6, "\(count)")
        #expect(count.most >= count.expected && count.fewest <= count.expected)
        #expect(count.description.hasPrefix("about "))
        #expect(count.formulas.count == 2)
        #expect(count.formulas[0].contains("every 1ms..2ms"), "\(count.formulas)")
        // Later occurrences are drawn as reached: a million of them, one at a time.
        var iterator = timeline.makeIterator()
        var last = ChaosDuration.zero
        for _ in 0..<1_000_000 {
            let drawn = iterator.next()
            let next = try #require(drawn)
            #expect(next.at >= last)
            last = next.at
        }
        #expect(last > .seconds(Int64(1_000)))
    }

    @Test("a small timeline is counted exactly")
    func exactCount() throws {
        let timeline = Timeline(scenario: try TimelineTests().scenario("  - disconnect: {every: 1s}"), seed: 1)
        #expect(timeline.count().exact == 89)
        #expect(timeline.count().description == "89 fault occurrences")
    }

    @Test("a rare fault is refused: drawing billions that never happen would hang")
    func rareProbability() throws {
        #expect(throws: ChaosError.self) { try TimelineTests().scenario("  - disconnect: {every: 1ms, probability: 0.0000001}") }
        let never = Timeline(scenario: try TimelineTests().scenario("  - disconnect: {every: 1ms, probability: 0}", duration: "3650d"), seed: 1)
        #expect(Array(never).isEmpty)
    }

    @Test("a long timeline saves its first occurrences and says it is not complete; a short one saves all")
    func savedPrefix() throws {
        let long = Timeline(scenario: try TimelineTests().scenario("  - disconnect: {every: 1ms}", duration: "60s"), seed: 4)
        let decoded = try JSONDecoder().decode(Timeline.self, from: JSONEncoder().encode(long))
        #expect(!decoded.isComplete)
        #expect(Array(decoded) == Array(long.prefix(Timeline.savedOccurrences)))
        let short = Timeline(scenario: try TimelineTests().scenario("  - disconnect: {every: 1s}"), seed: 4)
        let shortDecoded = try JSONDecoder().decode(Timeline.self, from: JSONEncoder().encode(short))
        #expect(shortDecoded.isComplete)
        #expect(Array(shortDecoded) == Array(short))
        // Replay draws the rest again, after checking the saved ones; a changed one is bad input.
        let whole = try decoded.completed(
            from: try TimelineTests().scenario("  - disconnect: {every: 1ms}", duration: "60s"),
            source: "timeline.json"
        )
        #expect(whole.isComplete)
        #expect(Array(whole) == Array(long))
        let tampered = try TimelineTests().scenario("  - disconnect: {every: 2ms}", duration: "60s")
        #expect(throws: ChaosError.self) { try decoded.completed(from: tampered, source: "timeline.json") }
        // A timeline.json from before the lazy draw (no "complete" key) is complete.
        let old = #"{"seed": 1, "duration": "1s", "occurrences": []}"#
        #expect(try JSONDecoder().decode(Timeline.self, from: Data(old.utf8)).isComplete)
    }
}

/// The timeline as chaos drew it before it was lazy (commit 3aaa5d7), kept as the reference that fixes what
/// a seed means: every occurrence drawn up front, then sorted by time and rule.
enum EagerTimeline {
    static func draw(scenario: Scenario, seed: UInt64, duration end: ChaosDuration) -> [FaultOccurrence] {
        let root = SeededGenerator(seed: seed)
        var drafts: [FaultOccurrence] = []
        for (ruleIndex, rule) in scenario.faults.enumerated() {
            var generator = root.fork("rule", UInt64(ruleIndex))
            let schedule = rule.schedule
            let stop = min(schedule.until ?? end, end)
            func emit(at start: ChaosDuration) {
                let happens = generator.nextUnit() < schedule.probability
                let effect = rule.parameters.drawn(with: &generator)
                var lasts: ChaosDuration =
                    switch effect {
                    case .disconnect, .protocolFault: .zero
                    case .handoff(_, _, let blackout, _, let deadWiFi, _): blackout + (deadWiFi ?? .zero)
                    case .restart(let down, _): down
                    default: schedule.lasts.map { generator.draw($0) } ?? (stop - start)
                    }
                let seed = generator.next()
                guard happens, start >= schedule.after, start < stop else { return }
                switch effect {
                case .handoff, .restart: break
                default: lasts = min(lasts, end - start)
                }
                drafts.append(
                    FaultOccurrence(
                        index: 0,
                        rule: ruleIndex,
                        at: start,
                        lasts: lasts,
                        proxy: rule.proxy,
                        targets: schedule.targets,
                        seed: seed,
                        effect: effect
                    )
                )
            }
            if let at = schedule.at {
                emit(at: generator.draw(at))
            } else if let every = schedule.every {
                var start = schedule.after + generator.draw(every)
                while start < stop {
                    emit(at: start)
                    start = start + generator.draw(every)
                }
            } else {
                emit(at: schedule.after)
            }
        }
        drafts.sort { ($0.at, $0.rule) < ($1.at, $1.rule) }
        for index in drafts.indices { drafts[index].index = index }
        return drafts
    }
}
