import ChaosAudit
import ChaosCore
import ChaosReport
import Foundation
import FoundationXML
import Testing

/// Collects the test cases of a JUnit file as parsed by a real XML parser.
final class JUnitCollector: NSObject, XMLParserDelegate {
    struct Case {
        var name: String
        var failure: String?
        var failureBody = ""
    }
    var cases: [Case] = []
    var suites = 0
    private var inFailure = false

    func parser(
        _ parser: XMLParser,
        didStartElement name: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String]
    ) {
        switch name {
        case "testsuite": suites += 1
        case "testcase": cases.append(Case(name: attributes["name"] ?? ""))
        case "failure":
            cases[cases.count - 1].failure = attributes["message"] ?? ""
            inFailure = true
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if inFailure { cases[cases.count - 1].failureBody += string }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if name == "failure" { inFailure = false }
    }
}

@Suite("Reports")
struct ReportTests {
    @Test("a clean run passes every expectation")
    func passing() throws {
        let report = try ReportFixtures.report()
        #expect(report.verdict == .pass, "\(report.expectations) \(report.recovery)")
        #expect(report.totals.lost == 0 && report.totals.ok == 200)
        #expect(report.expectations.count == 4 && report.expectations.allSatisfy(\.ok))
        #expect(report.faults.map(\.kind) == ["disconnect", "partition"])
        #expect(report.faults[0].connections == 1 && report.faults[0].detail["mode"] == "reset")
        let reconnect = try #require(report.faults[0].reconnectS)
        #expect(abs(reconnect - 0.4) < 0.001)
        #expect(report.recovery.reconnectS.count == 1)
    }

    @Test("a lost message fails the run and the failing expectation carries the actual value")
    func failing() throws {
        let report = try ReportFixtures.report(skip: [50])
        #expect(report.verdict == .fail)
        let lost = try #require(report.expectations.first { $0.name == "lost" })
        #expect(!lost.ok && lost.actual == "1" && lost.value == 1)
        #expect(report.verdictReason?.contains("lost is 1") == true)
        let gap = try #require(report.anomalies.first { $0.kind == .gap })
        #expect(gap.fromSeq == 50 && gap.toSeq == 50 && gap.fault == "disconnect" && gap.faultActive == false)
    }

    @Test("a run that could not be judged has the error verdict")
    func errorVerdict() throws {
        let report = try ReportFixtures.report(error: "the pair did not start")
        #expect(report.verdict == .error && report.verdictReason == "the pair did not start")
    }

    @Test("report.json keeps the PRODUCT §5 field names and decodes back to the same report")
    func jsonRoundTrip() throws {
        let report = try ReportFixtures.report(skip: [120])
        let directory = ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try report.write(toDirectory: directory)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(files == ["junit.xml", "report.html", "report.json", "report.md"])
        let data = try #require(FileManager.default.contents(atPath: directory + "/report.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        for key in [
            "schema", "scenario", "seed", "started_at", "elapsed_s", "complete", "verdict", "replay", "faults",
            "totals", "streams", "anomalies", "recovery", "connections", "expectations",
        ] {
            #expect(object[key] != nil, "missing \(key)")
        }
        #expect(object["schema"] as? String == "chaos.report/1")
        #expect(object["started_at"] as? String == "2026-11-18T11:06:40Z")
        let totals = try #require(object["totals"] as? [String: Any])
        for key in [
            "sent", "delivered", "ok", "lost", "recovered", "duplicated", "redelivered", "reordered", "gaps", "unacked",
            "delivery_ratio",
        ] {
            #expect(totals[key] != nil, "missing totals.\(key)")
        }
        let anomaly = try #require((object["anomalies"] as? [[String: Any]])?.first)
        for key in ["class", "stream", "direction", "from_seq", "to_seq", "at_s", "fault"] { #expect(anomaly[key] != nil, "missing \(key)") }
        let recovery = try #require(object["recovery"] as? [String: Any])
        #expect((recovery["reconnect_s"] as? [String: Any])?["p99"] != nil && recovery["resume_s"] != nil)
        let connections = try #require(object["connections"] as? [String: Any])
        #expect(Set(connections.keys).isSuperset(of: ["opened", "cut_by_fault", "refused"]))
        let fault = try #require((object["faults"] as? [[String: Any]])?.first)
        #expect(fault["at_s"] as? Double == 2.0 && fault["for_s"] != nil && fault["connections"] as? Int == 1)
        let stream = try #require((object["streams"] as? [[String: Any]])?.first)
        #expect(stream["stream"] as? String == "c1" && stream["lost"] as? Int == 1)
        #expect(try RunReport.load(fromDirectory: directory) == report)
    }

    @Test("a missing or garbled report.json is bad input with a clear message")
    func badInput() throws {
        let directory = ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let missing = #expect(throws: ChaosError.self) { try RunReport.load(fromDirectory: directory) }
        #expect(missing?.code == .badInput && missing?.message.contains("no report.json") == true)
        try Data("{\"schema\": 3".utf8).write(to: URL(fileURLWithPath: directory + "/report.json"))
        let garbled = #expect(throws: ChaosError.self) { try RunReport.load(fromDirectory: directory) }
        #expect(garbled?.code == .badInput && garbled?.message.contains("not a chaos report") == true)
    }

    @Test("junit.xml parses as XML with one test case per expectation and failures carrying the actual value")
    func junit() throws {
        let report = try ReportFixtures.report(skip: [50, 51])
        let xml = JUnitRenderer().render(report)
        let collector = JUnitCollector()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = collector
        #expect(parser.parse(), "not well-formed: \(String(describing: parser.parserError))")
        #expect(collector.suites == 1)
        #expect(collector.cases.count == report.expectations.count)
        let lost = try #require(collector.cases.first { $0.name.hasPrefix("lost") })
        #expect(lost.failure?.contains("lost is 2") == true && lost.failureBody.contains("actual: 2"))
        let duplicated = try #require(collector.cases.first { $0.name.hasPrefix("duplicated") })
        #expect(duplicated.failure == nil)
    }

    @Test("junit.xml validates with python's xml.etree too")
    func junitWithPython() throws {
        let directory = ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = try ReportFixtures.report(skip: [7])
        try report.write(toDirectory: directory)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            """
            import sys, xml.etree.ElementTree as ET
            root = ET.parse(sys.argv[1]).getroot()
            cases = root.findall('./testsuite/testcase')
            failures = [c for c in cases if c.find('failure') is not None]
            print(len(cases), len(failures), failures[0].find('failure').get('message'))
            """, directory + "/junit.xml",
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0)
        #expect(output.hasPrefix("4 1 lost is 1, expected <= 0"))
    }

    @Test("report.md starts with the verdict line and ends with the replay command")
    func markdown() throws {
        let report = try ReportFixtures.report(skip: [50])
        let text = MarkdownRenderer().render(report)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first?.hasPrefix("## chaos FAIL: fixture (seed 7): 199 ok, 1 lost") == true)
        #expect(text.contains("| c1 | downstream | 199 | 199 | 199 | 1 |"))
        #expect(text.contains("| 0 | 2.00s | disconnect |"))
        #expect(text.contains("after disconnect #0"))
        #expect(text.contains("*Delivered* = the consumer's TCP acknowledged the message's last byte"), "report.md says what delivered means")
        #expect(text.contains("```sh\nchaos run Scenarios/fixture.yaml --seed 7\n```"))
        let github = MarkdownRenderer(flavor: .github).render(report)
        #expect(github.hasPrefix("## ❌ chaos FAIL"))
        // With its folder known (a written report.md, chaos report DIR), a failure after a fault ends with the shrink:
        // of the folder here, of its bundle on GitHub (the runner's folder is gone; the chaos action uploads the bundle).
        let shrink = MarkdownRenderer(runFolder: "Reports/fixture-1").render(report)
        #expect(shrink.hasSuffix("```sh\nchaos shrink Reports/fixture-1\n```\n"), "\(shrink.suffix(200))")
        let shrinkOnGitHub = MarkdownRenderer(flavor: .github, runFolder: "chaos-report").render(report)
        #expect(shrinkOnGitHub.hasSuffix("```sh\nchaos shrink chaos-report.tar.gz\n```\n"), "\(shrinkOnGitHub.suffix(300))")
        #expect(shrinkOnGitHub.contains("`chaos-bundle` artifact"), "\(shrinkOnGitHub.suffix(300))")
        #expect(
            !MarkdownRenderer(runFolder: "Reports/x").render(try ReportFixtures.report()).contains("chaos shrink"),
            "a passing run has nothing to shrink"
        )
    }

    @Test("report.html is one self-contained page with the timeline")
    func html() throws {
        let report = try ReportFixtures.report(skip: [50])
        let html = HTMLRenderer().render(report)
        #expect(html.hasPrefix("<!DOCTYPE html>") && html.hasSuffix("</html>\n"))
        #expect(!html.contains("src=") && !html.contains("href=") && !html.contains("@import"))
        #expect(html.components(separatedBy: "<rect class=\"fault\"").count - 1 == report.faults.count)
        #expect(html.contains("<path id=\"rate\""))
        #expect(html.components(separatedBy: "class=\"anomaly\"").count - 1 == report.anomalies.filter { $0.kind != .lost }.count)
        #expect(html.contains("class=\"reconnect\""))
    }

    @Test("what each end's TCP met on a fault's dead paths is one table in report.md and report.html, absent when no fault made one")
    func deadPathTable() throws {
        var report = try ReportFixtures.report()
        #expect(!report.faults.isEmpty)
        var figures = DeadPathFigures()
        figures.connections = 3
        figures.inKernel = true
        figures.client.sentBytes = 1_500_000
        figures.server.sentBytes = 640
        figures.client.proxyRetransmissions = 4
        figures.server.proxyRetransmissions = 2
        figures.client.closedFirst = 2
        figures.neitherClosed = 1
        report.faults[0].deadPath = figures
        let row = "| \(report.faults[0].occurrence) | \(report.faults[0].kind) | dropped in the kernel | 3 | 1.50 MB / 640 B | 0 B | 6 | 2 / 0 / 1 |"
        let text = MarkdownRenderer().render(report)
        #expect(text.contains("What each end's TCP met while the path was dead (from the proxy's legs):\n\n| # | fault | path |"), "\(text)")
        #expect(text.contains("|--:|---|---|--:|--:|--:|--:|---|\n" + row + "\n"), "\(text)")
        let html = HTMLRenderer().render(report)
        #expect(html.contains("<table id=dead-paths><tr><th>#</th><th class=l>fault</th><th class=l>path</th>"), "\(html)")
        #expect(
            html.contains(
                "<tr><td>\(report.faults[0].occurrence)</td><td class=l>\(report.faults[0].kind)</td><td class=l>dropped in the kernel</td><td>3</td>"
                    + "<td>1.50 MB / 640 B</td><td>0 B</td><td>6</td><td class=l>2 / 0 / 1</td></tr></table>"
            )
        )
        let plain = try ReportFixtures.report()
        #expect(!MarkdownRenderer().render(plain).contains("What each end's TCP met") && !HTMLRenderer().render(plain).contains("dead-paths"))
    }

    @Test("what people did through the live page (pause, resume, a fault, a stop) is listed in report.md and report.html, escaped")
    func manualActions() throws {
        var report = try ReportFixtures.report()
        report.manual = [
            ManualAction(atS: 3.5, action: .pause), ManualAction(atS: 7.25, action: .resume, detail: "paused for 3.75s"),
            ManualAction(atS: 9, action: .fault, detail: #"{"partition": {"for": "<2s>"}}"#),
            ManualAction(atS: 12, action: .stop, detail: "POST /stop"),
        ]
        let text = MarkdownRenderer().render(report)
        #expect(text.contains("### What people did\n\n- 3.50s pause\n- 7.25s resume: `paused for 3.75s`\n"), "\(text)")
        let html = HTMLRenderer().render(report)
        #expect(html.contains("<h2>What people did</h2><ul id=manual><li>3.50s pause</li>"), "\(html)")
        #expect(html.contains("&lt;2s&gt;") && !html.contains("<2s>"))
        #expect(!MarkdownRenderer().render(try ReportFixtures.report()).contains("What people did"))
        let json = try JSONSerialization.jsonObject(with: try report.jsonData()) as? [String: Any] ?? [:]
        let manual = json["manual"] as? [[String: Any]] ?? []
        #expect(manual.map { $0["action"] as? String } == ["pause", "resume", "fault", "stop"] && manual.first?["at_s"] as? Double == 3.5)
    }

    @Test("--compare shows what got worse than the baseline")
    func comparison() throws {
        let baseline = try ReportFixtures.report()
        let current = try ReportFixtures.report(skip: [10, 11, 12])
        let comparison = ReportComparison(current: current, baseline: baseline, baselineName: "Reports/base")
        #expect(Set(comparison.worse.map(\.figure)).isSuperset(of: ["lost", "delivery", "gaps"]))
        #expect(comparison.newlyFailing.contains("lost") && comparison.newlyFailing.contains("delivery"))
        #expect(ReportComparison(current: baseline, baseline: current, baselineName: "x").worse.isEmpty)
        #expect(comparison.markdownLines().first?.contains("got worse") == true)
    }
}
