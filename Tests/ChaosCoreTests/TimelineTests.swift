import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

@Suite("Timeline")
struct TimelineTests {
    func scenario(_ faults: String, duration: String = "90s") throws -> Scenario {
        try Scenario.parse(
            yaml: """
                name: t
                duration: \(duration)
                proxies:
                  - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
                faults:
                \(faults)
                """,
            file: "t.yaml"
        )
    }

    @Test("same seed, byte-identical timeline; another seed, another timeline")
    func determinism() throws {
        let s = try Scenario.parse(yaml: ScenarioParsingTests.quickstart, file: "q.yaml")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let a = try encoder.encode(Timeline(scenario: s, seed: 42))
        let b = try encoder.encode(Timeline(scenario: s, seed: 42))
        let c = try encoder.encode(Timeline(scenario: s, seed: 43))
        #expect(a == b)
        #expect(a != c)
        #expect(Timeline(scenario: s, seed: 42).lines(first: 100) == Timeline(scenario: s, seed: 42).lines(first: 100))
    }

    @Test("a timeline written as JSON and read back is the same to the nanosecond (what replay needs)")
    func roundTrip() throws {
        let s = try Scenario.parse(yaml: ScenarioParsingTests.quickstart, file: "q.yaml")
        let timeline = Timeline(scenario: s, seed: 42)
        let decoded = try JSONDecoder().decode(Timeline.self, from: JSONEncoder().encode(timeline))
        #expect(Array(decoded) == Array(timeline))
        #expect(try JSONDecoder().decode(Scenario.self, from: JSONEncoder().encode(s)) == s)
    }

    /// No wall-clock bound here: the suite runs on shared, loaded machines, where a bound on a draw's time is a flake.
    @Test("a 72-hour timeline's gaps stay in range with the expected mean")
    func seventyTwoHours() throws {
        let s = try scenario("  - disconnect: {every: 5s..30s}", duration: "72h")
        let starts = Array(Timeline(scenario: s, seed: 7)).map(\.at.seconds)
        let gaps = zip(starts.dropFirst(), starts).map { $0 - $1 }
        #expect(starts.count > 8000)  // 72 h / 17.5 s ≈ 14,800
        #expect(gaps.allSatisfy { $0 >= 5 && $0 <= 30 })
        let mean = gaps.reduce(0, +) / Double(gaps.count)
        #expect(abs(mean - 17.5) < 0.3, "mean gap \(mean)")
        #expect(starts.last! < 72 * 3600)
    }

    @Test("once-only faults happen at their time; windows and probability are honoured")
    func schedules() throws {
        let s = try scenario(
            """
              - partition: {at: 40s, for: 15s}
              - disconnect: {every: 1s, after: 10s, until: 20s}
              - stall: {every: 2s, for: 1s, probability: 0.5}
              - latency: {add: 100ms}
            """
        )
        let t = Timeline(scenario: s, seed: 1)
        let partition = Array(t).filter { $0.kind == .partition }
        #expect(partition.map(\.at) == [.seconds(Int64(40))])
        #expect(partition.map(\.lasts) == [.seconds(Int64(15))])
        let disconnects = Array(t).filter { $0.kind == .disconnect }.map(\.at.seconds)
        #expect(disconnects == Array(stride(from: 11.0, through: 19.0, by: 1.0)))
        let stalls = Array(t).filter { $0.kind == .stall }.count
        #expect(stalls > 10 && stalls < 35, "\(stalls) of 44 with probability 0.5")
        let latency = Array(t).filter { $0.kind == .latency }
        #expect(latency.map(\.at) == [.zero])
        #expect(latency.map(\.lasts) == [.seconds(Int64(90))])
        #expect(Array(t).map(\.index) == Array(0..<Array(t).count))
        #expect(zip(Array(t), Array(t).dropFirst()).allSatisfy { $0.at <= $1.at })
    }

    @Test("adding a rule does not shift the draws of the others")
    func rulesAreIndependent() throws {
        let one = Timeline(scenario: try scenario("  - disconnect: {every: 5s..30s}"), seed: 9)
        let two = Timeline(scenario: try scenario("  - disconnect: {every: 5s..30s}\n  - stall: {every: 3s..4s, for: 1s}"), seed: 9)
        #expect(Array(one).map(\.at) == Array(two).filter { $0.kind == .disconnect }.map(\.at))
    }

    @Test("targets pick the same connections for the same seed")
    func targets() {
        var a = SeededGenerator(seed: 5)
        var b = SeededGenerator(seed: 5)
        let ids: [ConnectionID] = Array(1...20)
        let first = Targets.fraction(0.25).pick(from: ids, using: &a)
        #expect(first.count == 5)
        #expect(first == Targets.fraction(0.25).pick(from: ids.reversed(), using: &b))
        var c = SeededGenerator(seed: 5)
        #expect(Targets.count(3).pick(from: ids, using: &c).count == 3)
        var d = SeededGenerator(seed: 5)
        #expect(Targets.all.pick(from: [3, 1, 2], using: &d) == [1, 2, 3])
    }

    @Test("the seeded generator is the same on every run and uniform enough")
    func generator() {
        var g = SeededGenerator(seed: 42)
        let first = (0..<3).map { _ in g.next() }
        var h = SeededGenerator(seed: 42)
        #expect(first == (0..<3).map { _ in h.next() })
        var counts = [Int](repeating: 0, count: 10)
        for _ in 0..<100_000 { counts[Int(g.next(upperBound: 10))] += 1 }
        #expect(counts.allSatisfy { abs($0 - 10_000) < 500 })
    }
}
