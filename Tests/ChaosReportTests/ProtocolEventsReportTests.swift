import ChaosAudit
import ChaosReport
import Foundation
import Testing

/// WebSocket protocol events in every report format: `protocol_events` in report.json (absent for lines framing),
/// a section in report.md and report.html.
@Suite("Protocol events in reports")
struct ProtocolEventsReportTests {
    @Test("protocol events are written as protocol_events, read back equal, and shown in markdown and html")
    func protocolEvents() throws {
        var report = try ReportFixtures.report()
        #expect(report.protocolEvents == nil, "lines framing has none")
        var events = ProtocolStats()
        events.upgrades = 3
        events.closeCodes = ["1012": 1, "1006": 2]
        events.closeCodesByFault = ["disconnect": ["1006": 2], "none": ["1012": 1]]
        events.abnormalClosures = 2
        events.pings = 40
        report.protocolEvents = events
        let directory = ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try report.write(toDirectory: directory)
        let data = try #require(FileManager.default.contents(atPath: directory + "/report.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let written = try #require(object["protocol_events"] as? [String: Any])
        #expect(written["close_codes"] as? [String: Int] == ["1012": 1, "1006": 2])
        #expect(written["abnormal_closures"] as? Int == 2)
        #expect(try RunReport.load(fromDirectory: directory) == report)
        let markdown = try String(contentsOfFile: directory + "/report.md", encoding: .utf8)
        #expect(markdown.contains("### Protocol events") && markdown.contains("close codes: 1006 × 2, 1012 × 1"))
        let html = try String(contentsOfFile: directory + "/report.html", encoding: .utf8)
        #expect(html.contains("<h2>Protocol events</h2>") && html.contains("during or after disconnect: 1006 × 2"))
    }
}
