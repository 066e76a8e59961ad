import ChaosAudit
import ChaosCore
import ChaosProtocols
import ChaosReport
import Foundation
import Testing

/// A verdict you can trust (PRODUCT §13): a run that judged nothing is `inconclusive`, never `pass`; a fault that
/// touched nothing is flagged; a stream that never resumed leads a failure, before a pair process's exit.
@Suite("Verdicts: inconclusive, unfired faults, the finding first")
struct VerdictTests {
    static func expectations(_ yaml: String) throws -> [ChaosCore.Expectation] {
        try Scenario.parse(
            yaml: ReportFixtures.yaml.replacingOccurrences(of: "expect:\n  lost: 0", with: "expect:\n  \(yaml)\n  lost: 0"),
            file: "v.yaml"
        )
        .expectations
    }

    @Test("a proxy no connection went through makes the run inconclusive (exit 1 as a failure), its reason first in every format")
    func idleProxy() throws {
        var report = try ReportFixtures.report()
        let scenario = try Scenario.parse(yaml: ReportFixtures.yaml, file: "fixture.yaml")
        report.judge(scenario.expectations, scope: JudgedScope(auditsMessages: true, idleProxies: ["'spare' (listen 127.0.0.1:7002)"]))
        #expect(report.verdict == .inconclusive)
        #expect(
            report.verdictReason?.hasPrefix("no connection went through proxy 'spare' (listen 127.0.0.1:7002)") == true,
            "\(report.verdictReason ?? "")"
        )
        #expect(report.expectations.allSatisfy { $0.ok }, "every expectation held: the run is still not a pass")
        let markdown = MarkdownRenderer().render(report)
        #expect(markdown.hasPrefix("## chaos INCONCLUSIVE: fixture"))
        #expect(markdown.contains("> The run judged too little to pass:\n> - no connection went through proxy 'spare'"))
        let junit = JUnitRenderer().render(report)
        #expect(junit.contains("name=\"judged something\""))
        #expect(junit.contains("type=\"inconclusive\""))
        #expect(junit.contains("failures=\"1\""))
        let html = HTMLRenderer().render(report)
        #expect(html.contains("<span class=\"verdict inconclusive\">INCONCLUSIVE</span>"))
        #expect(
            html.contains("<li>no connection went through proxy &#39;spare&#39;") || html.contains("<li>no connection went through proxy 'spare'")
        )
        let decoded = try RunReport.decode(report.jsonData(), source: "report.json")
        #expect(decoded.verdict == .inconclusive && decoded.inconclusive == report.inconclusive)
    }

    @Test("bytes but no audited message (seq names a key the messages lack): inconclusive, naming the first message and its keys")
    func wrongSeqKey() throws {
        var report = try ReportFixtures.report(key: "sequence_id")
        let scenario = try Scenario.parse(yaml: ReportFixtures.yaml, file: "fixture.yaml")
        report.judge(scenario.expectations, scope: JudgedScope(auditsMessages: true))
        #expect(report.totals.sent == 0)
        #expect(report.verdict == .inconclusive)
        let reason = try #require(report.verdictReason)
        #expect(reason.contains("went through chaos but no message was audited"), "\(reason)")
        #expect(reason.contains(": 200 messages without a seq;"), "\(reason)")
        #expect(reason.contains("first: the message ending at byte 45 of connection #1 (downstream)"), "\(reason)")
        #expect(reason.contains("(no `seq`; its keys: sequence_id, stream, type)"), "\(reason)")
        #expect(reason.contains("{\"type\":\"MSG\",\"stream\":\"c1\",\"sequence_id\":1}"), "\(reason)")
    }

    @Test("the messages floor: a bare number means at least; too few is inconclusive, not failed; a pair's default floor")
    func messagesFloor() throws {
        let floor = try Self.expectations("messages: 1000")
        #expect(floor.first { $0.name == "messages" }?.comparison == .atLeast)
        var report = try ReportFixtures.report()
        report.judge(floor, scope: JudgedScope(auditsMessages: true))
        #expect(report.verdict == .inconclusive, "\(report.verdictReason ?? "")")
        #expect(report.verdictReason == "fewer messages than the floor: 200 audited, expected >= 1000")
        report.judge(try Self.expectations("messages: 150"), scope: JudgedScope(auditsMessages: true))
        #expect(report.verdict == .pass)
        report.judge(
            try Scenario.parse(yaml: ReportFixtures.yaml, file: "fixture.yaml").expectations,
            scope: JudgedScope(auditsMessages: true, defaultFloor: 500)
        )
        #expect(report.verdict == .inconclusive)
        #expect(report.verdictReason?.contains("default floor") == true)
        // A real failure outranks judging too little: it was judged.
        var lossy = try ReportFixtures.report(skip: [50])
        lossy.judge(floor, scope: JudgedScope(auditsMessages: true))
        #expect(lossy.verdict == .fail)
        #expect(lossy.inconclusive?.first?.hasPrefix("fewer messages than the floor") == true)
        // A checkpoint is judged on the expectations only: the run goes on.
        var checkpoint = try ReportFixtures.report()
        checkpoint.complete = false
        checkpoint.judge(floor, scope: JudgedScope(auditsMessages: true, idleProxies: ["'x' (listen 1)"]))
        #expect(checkpoint.verdict == .pass && checkpoint.inconclusive == nil)
    }

    @Test("a fault that touched nothing is flagged in report.md and report.html; faults_fired: all makes it a failure")
    func unfiredFault() throws {
        var report = try ReportFixtures.report()
        #expect(report.faults.count == 2)
        report.faults[1].connections = 0
        report.faults[1].openedWhileOn = 0
        report.faults[0].connections = 1
        let fired = try Self.expectations("faults_fired: all")
        let rule = try #require(fired.first { $0.name == "faults_fired" })
        #expect(rule.comparison == .atLeast && rule.bound == 1)
        report.judge(fired)
        #expect(report.verdict == .fail)
        #expect(
            report.verdictReason == "faults_fired is 50.000% (1 touched nothing: partition #1), expected >= 100%",
            "\(report.verdictReason ?? "")"
        )
        #expect(MarkdownRenderer().render(report).contains("⚠ partition #1 touched no connection."))
        #expect(HTMLRenderer().render(report).contains("<li>partition #1 touched no connection</li>"))
        // Connections opened while it lasted count as touched.
        report.faults[1].openedWhileOn = 2
        report.judge(fired)
        #expect(report.verdict == .pass)
        #expect(MarkdownRenderer().render(report).contains("| 0 (+2 new) |"))
        #expect(throws: ChaosError.self) { try Self.expectations("faults_fired: some") }
    }

    @Test("a pair process that exited is context: a stream that never resumed is the failure and leads; nothing failed: error")
    func findingBeforeFormality() throws {
        var report = try ReportFixtures.report()
        let scenario = try Scenario.parse(yaml: ReportFixtures.yaml, file: "fixture.yaml")
        report.judge(scenario.expectations, pairExitedEarly: "client-1 with status 0 at 00:00:09.000")
        #expect(report.verdict == .error)
        #expect(report.verdictReason == "pair process(es) exited during the run: client-1 with status 0 at 00:00:09.000")
        report.recovery.neverResumed = 1
        report.judge(scenario.expectations, pairExitedEarly: "client-1 with status 0 at 00:00:09.000")
        #expect(report.verdict == .fail)
        let reason = try #require(report.verdictReason)
        #expect(reason.hasPrefix("1 stream never resumed after a fault; "), "\(reason)")
        #expect(reason.hasSuffix("pair process(es) exited during the run: client-1 with status 0 at 00:00:09.000"), "\(reason)")
    }
}
