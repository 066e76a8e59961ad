import ChaosCore
import ChaosProtocols
import Foundation
import Testing

/// Pauses of the fault schedule (the live page's, a replay's): when each occurrence begins after them, and how
/// timeline.json keeps them.
@Suite("Schedule pauses")
struct SchedulePausesTests {
    static let pauses = SchedulePauses(spans: [
        .init(at: .seconds(Int64(4)), lasts: .seconds(Int64(3))), .init(at: .seconds(Int64(10)), lasts: .seconds(Int64(2))),
    ])

    @Test("an occurrence begins later by every pause that began by then, a pause at its very instant too; one before them does not move")
    func beginsAfterThePauses() {
        let cases: [(Double, Double)] = [(1, 1), (3.9, 3.9), (4, 7), (5, 8), (6.5, 9.5), (9, 14), (10, 15), (20, 25)]
        for (planned, begins) in cases {
            #expect(Self.pauses.begin(ofPlanned: .seconds(planned)) == .seconds(begins), "planned at \(planned) s")
        }
        #expect(Self.pauses.total == .seconds(Int64(5)))
        #expect(SchedulePauses.none.begin(ofPlanned: .seconds(Int64(3))) == .seconds(Int64(3)))
    }

    static func timeline() throws -> Timeline {
        let scenario = try Scenario.parse(
            yaml: """
                name: paused
                duration: 30s
                proxies:
                  - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
                faults:
                  - disconnect: {every: 3s}
                """,
            file: "paused.yaml"
        )
        return Timeline(scenario: scenario, seed: 3)
    }

    @Test("timeline.json keeps the pauses (and has no such key without them: a run never paused saves the same bytes); a replay reads them back")
    func savedAndReadBack() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var timeline = try Self.timeline()
        let plain = String(decoding: try encoder.encode(timeline), as: UTF8.self)
        #expect(!plain.contains("pauses"))
        timeline.pauses = Self.pauses
        let saved = try encoder.encode(timeline)
        #expect(String(decoding: saved, as: UTF8.self).contains(#""pauses" : ["#))
        let read = try JSONDecoder().decode(Timeline.self, from: saved)
        #expect(read.pauses == Self.pauses)
        #expect(Array(read) == Array(timeline))
        // The occurrences a report lists by a time count the pauses: planned at 3 s and 6 s, they begin at 3 s and
        // 9 s (the pause at 4 s moved the second).
        #expect(read.occurrences(through: .seconds(Int64(8))).map { read.begin(of: $0) } == [.seconds(Int64(3))])
        #expect(read.occurrences(through: .seconds(Int64(9))).map { read.begin(of: $0) } == [.seconds(Int64(3)), .seconds(Int64(9))])
    }

    @Test("pauses that overlap, or negative ones, are refused as a damaged timeline.json")
    func damagedPauses() throws {
        for pauses in [#"[{"at": "4s", "for": "3s"}, {"at": "5s", "for": "1s"}]"#, #"[{"at": "-1s", "for": "1s"}]"#] {
            let json = #"{"seed": 1, "duration": "10s", "occurrences": [], "pauses": "# + pauses + "}"
            #expect(throws: DecodingError.self, "\(pauses)") { try JSONDecoder().decode(Timeline.self, from: Data(json.utf8)) }
        }
    }
}
