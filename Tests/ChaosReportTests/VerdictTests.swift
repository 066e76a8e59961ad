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

    @Test("an at-most-once stream's losses (MQTT QoS 0) are counted and shown, but lost judges the others; lost_qos0 judges them")
    func atMostOnceLosses() throws {
        var report = try ReportFixtures.report(skip: [50, 51])
        #expect(report.totals.lost == 2 && report.measured("lost") == 2 && report.measured("lost_qos0") == 0)
        #expect(report.failureRecords().contains { $0.kind == "lost" })
        for index in report.streams.indices { report.streams[index].contract = .atMostOnce }
        report.judge(try Self.expectations("lost_qos0: 0"))
        #expect(report.totals.lost == 2, "still counted")
        #expect(report.measured("lost") == 0 && report.measured("lost_qos0") == 2)
        #expect(report.expectations.first { $0.name == "lost" }?.ok == true)
        #expect(report.expectations.first { $0.name == "lost_qos0" }.map { !$0.ok && $0.actual == "2" } == true)
        #expect(report.verdict == .fail, "lost_qos0: 0 says so")
        #expect(!report.failureRecords().contains { $0.kind == "lost" }, "a loss its contract allows is not a failure")
        let markdown = MarkdownRenderer().render(report)
        #expect(markdown.contains("⚠ 2 seqs lost from at-most-once streams (c1 downstream)"), "\(markdown.prefix(1500))")
        let decoded = try RunReport.decode(report.jsonData(), source: "report.json")
        #expect(decoded.streams.allSatisfy { $0.contract == .atMostOnce })
        report.judge(try Scenario.parse(yaml: ReportFixtures.yaml, file: "fixture.yaml").expectations)
        #expect(report.verdict == .pass, "without lost_qos0, the contract's losses fail nothing: \(report.expectations)")
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

    @Test("a framing that matches nothing (websocket over lines): inconclusive, the bytes named as not fitting it")
    func framingMatchesNothing() throws {
        var report = try ReportFixtures.report(framing: "websocket")
        let scenario = try Scenario.parse(yaml: ReportFixtures.yaml, file: "fixture.yaml")
        report.judge(scenario.expectations, scope: JudgedScope(auditsMessages: true))
        #expect(report.totals.sent == 0)
        #expect(report.verdict == .inconclusive)
        let reason = try #require(report.verdictReason)
        #expect(reason.contains("went through chaos but no message was audited: "), "\(reason)")
        #expect(!reason.hasSuffix("no complete message in the declared framing"), "the reason names what the bytes were: \(reason)")
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

/// `failures[]`: each failure with the fault occurrences before it.
@Suite("Failures tied to their faults")
struct FailureRecordTests {
    @Test("a lost seq is a failure at the moment its gap showed, naming the fault before it; first_failure_s is the earliest")
    func lostAfterFault() throws {
        let report = try ReportFixtures.report(skip: [50])
        let failures = try #require(report.failures)
        // The loss, and the partition at 8 s whose half-open connections the fixture's pair never closed.
        #expect(failures.map(\.kind) == ["lost", "half_open_unnoticed"], "\(failures.map(\.account))")
        let lost = try #require(failures.first)
        #expect(lost.kind == "lost" && lost.stream == "c1" && lost.fromSeq == 50 && lost.toSeq == 50)
        #expect(abs(lost.atS - 5.1) < 0.01, "the gap showed when seq 51 was delivered: \(lost.atS)")
        #expect(lost.faults == [0], "the disconnect at 2 s is the only fault before it: \(lost.faults)")
        #expect(
            lost.account.hasPrefix("c1 downstream lost seq 50: the gap showed on connection #2 at 5.10s, after disconnect #0 (2.00s)"),
            "\(lost.account)"
        )
        #expect(report.firstFailureS == lost.atS)
        #expect(MarkdownRenderer().render(report).contains("### Failures (2, the first at 5.10s)\n\n- c1 downstream lost seq 50"))
        #expect(
            failures[1].faults == [1] && failures[1].account.hasPrefix("partition #1 at 8.00s left 1 of 1 connection(s) half-open"),
            "\(failures[1].account)"
        )
        #expect(HTMLRenderer().render(report).contains("<ol id=failures><li>c1 downstream lost seq 50"))
        let decoded = try RunReport.decode(report.jsonData(), source: "report.json")
        #expect(decoded.failures == report.failures && decoded.firstFailureS == report.firstFailureS)
        #expect(try ReportFixtures.report().failures?.map(\.kind) == ["half_open_unnoticed"], "no loss in a clean run")
    }

    @Test("a narrower window names no fault, and says so")
    func windowBounds() throws {
        var report = try ReportFixtures.report(skip: [50])
        let failures = report.failureRecords(window: 1)
        #expect(failures.first?.faults == [])
        #expect(failures.first?.account.hasSuffix("no fault in the 1.00s before it.") == true, "\(failures.first?.account ?? "")")
        report.faults[0].neverResumed = 2
        #expect(
            report.failureRecords().contains {
                $0.kind == "never_resumed" && $0.faults == [0] && $0.account.hasPrefix("2 streams interrupted by disconnect #0")
            }
        )
    }
}
