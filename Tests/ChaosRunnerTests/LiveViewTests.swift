import ChaosAudit
import ChaosControl
import ChaosCore
import ChaosProtocols
import ChaosProxy
import ChaosReport
import Foundation
import Synchronization
import Testing

@testable import ChaosRunner

/// The live page's figures at a fleet's size: 50,000 stream-directions paged and searched worst first, one report
/// made a second however often the page asks, and the fleet's other agents named.
@Suite("The live page's figures at a fleet's size")
struct LiveViewTests {
    /// A report of `count` stream-directions named `device-N`; one in 997 lost some messages.
    static func report(streams count: Int) throws -> RunReport {
        let scenario = try Scenario.parse(
            yaml: """
                name: fleet
                duration: 60s
                proxies:
                  - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
                protocol: {framing: lines, format: json, seq: seq, stream: stream}
                faults:
                  - disconnect: {at: 5s}
                """,
            file: "fleet.yaml"
        )
        let engine = try AuditEngine(spec: try #require(scenario.protocolSpec))
        var report = RunReport(
            ReportInputs(
                scenario: scenario.name,
                seed: 11,
                startedAt: Date(timeIntervalSince1970: 1_795_000_000),
                elapsed: .seconds(Int64(30)),
                complete: false,
                timeline: Timeline(scenario: scenario, seed: 11),
                audit: engine.finish(),
                expectations: scenario.expectations,
                replay: "chaos run fleet.yaml --seed 11"
            )
        )
        report.streams = (0..<count).map { index in
            var counts = DeliveryCounts()
            counts.sent = 100
            counts.delivered = 100
            counts.ok = 100
            if index % 997 == 13 {
                counts.lost = Int64(index % 7 + 1)
                counts.ok -= counts.lost
                counts.delivered -= counts.lost
            }
            counts.updateRatio()
            return StreamResult(stream: "device-\(index)", direction: .upstream, counts: counts, firstSeq: 1, highestSeq: 100, ackedUpTo: nil)
        }
        return report
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("50,000 stream-directions: the worst first, paged by 100 and searched by name; one report for every ask while it is fresh; the peers named")
    func fleetSize() throws {
        let report = try Self.report(streams: 50_000)
        let made = Mutex(0)
        let clock = RunClock()
        /// A view of `report` on a stopped run, counting the reports it makes in `made`.
        func makeView(peers: [String], freshFor: UInt64) -> LiveView {
            LiveView(
                report: {
                    made.withLock { $0 += 1 }
                    return report
                },
                injector: FaultInjector(timeline: Timeline(seed: 0, duration: .zero, occurrences: []), proxies: [], clock: clock, sink: nil),
                proxies: [],
                manual: ManualActions(clock: clock),
                peers: peers,
                freshFor: freshFor
            )
        }
        // Fresh for an hour here: however slow the machine, every ask below falls within it (0.9 s in a run).
        let view = makeView(peers: ["http://agent-2:9090"], freshFor: 3_600_000_000_000)
        let state = try Self.json(view.state())
        #expect(state["scenario"] as? String == "fleet" && state["peers"] as? [String] == ["http://agent-2:9090"])
        let streams = state["streams"] as? [String: Any] ?? [:]
        #expect(streams["count"] as? Int == 50_000)
        let worst = streams["worst"] as? [[String: Any]] ?? []
        // 50 of the 50,000 lost something; the worst (7 lost) come first.
        #expect(worst.count == 10 && worst.first?["lost"] as? Int == 7, "\(worst.first ?? [:])")
        let first = try Self.json(view.streams(page: 0, search: ""))
        #expect(first["pages"] as? Int == 500 && (first["rows"] as? [Any])?.count == 100)
        let troubled = (first["rows"] as? [[String: Any]] ?? []).prefix { ($0["lost"] as? Int ?? 0) > 0 }
        #expect(troubled.count == 51, "the 51 that lost something lead the first page")
        let last = try Self.json(view.streams(page: 10_000, search: ""))
        #expect(last["page"] as? Int == 499)
        let searched = try Self.json(view.streams(page: 0, search: "DEVICE-4242"))
        let names = (searched["rows"] as? [[String: Any]] ?? []).compactMap { $0["stream"] as? String }
        #expect(searched["matching"] as? Int == 11 && names.allSatisfy { $0.contains("device-4242") }, "\(names)")
        #expect(made.withLock { $0 } == 1, "one report for every ask while it is fresh")
        // Once it is stale, the next ask makes another.
        let stale = makeView(peers: [], freshFor: 0)
        _ = stale.state()
        _ = stale.streams(page: 0, search: "")
        #expect(made.withLock { $0 } == 3)
    }
}
