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
        events[family: "closeCodes"] = ["1012": 1, "1006": 2]
        events[familyByFault: "closeCodes"] = ["disconnect": ["1006": 2], "none": ["1012": 1]]
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
        #expect(markdown.contains("- upgrades 3, pings 40, abnormal closures (1006) 2\n"), "only the counters seen: \(markdown)")
        let html = try String(contentsOfFile: directory + "/report.html", encoding: .utf8)
        #expect(html.contains("<h2>Protocol events</h2>") && html.contains("during or after disconnect: 1006 × 2"))
    }

    @Test(
        "gRPC and HTTP/2 events (calls, statuses, GOAWAY, RST_STREAM, per fault) are written, read back equal, and shown in markdown; a report without them still reads"
    )
    func grpcEvents() throws {
        var report = try ReportFixtures.report()
        var events = ProtocolStats()
        events.calls = 5
        events.pings = 12
        events.pongs = 12
        events[family: "grpcStatuses"] = ["OK": 2, "UNAVAILABLE": 1]
        events[familyByFault: "grpcStatuses"] = ["goaway": ["UNAVAILABLE": 1], "none": ["OK": 2]]
        events[family: "goaways"] = ["NO_ERROR": 1]
        events[familyByFault: "goaways"] = ["goaway": ["NO_ERROR": 1]]
        events[family: "streamResets"] = ["CANCEL": 2]
        events[familyByFault: "streamResets"] = ["partition": ["CANCEL": 2]]
        report.protocolEvents = events
        let directory = ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try report.write(toDirectory: directory)
        let data = try #require(FileManager.default.contents(atPath: directory + "/report.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let written = try #require(object["protocol_events"] as? [String: Any])
        #expect(written["goaways"] as? [String: Int] == ["NO_ERROR": 1] && written["grpc_statuses"] as? [String: Int] == ["OK": 2, "UNAVAILABLE": 1])
        #expect(written["stream_resets_by_fault"] as? [String: [String: Int]] == ["partition": ["CANCEL": 2]])
        #expect(try RunReport.load(fromDirectory: directory) == report)
        let markdown = try String(contentsOfFile: directory + "/report.md", encoding: .utf8)
        #expect(markdown.contains("pings 12, pongs 12, gRPC calls 5"))
        #expect(markdown.contains("gRPC statuses: OK × 2, UNAVAILABLE × 1"))
        #expect(markdown.contains("HTTP/2 GOAWAY: NO_ERROR × 1") && markdown.contains("HTTP/2 RST_STREAM: CANCEL × 2"))
        #expect(!markdown.contains("close codes"), "a family with no counts is not shown")
        #expect(markdown.contains("GOAWAY during or after `goaway`: NO_ERROR × 1"))
        // A report.json written before these figures existed (only the WebSocket ones) reads with them zero.
        let old =
            #"{"upgrades":1,"upgrade_failures":0,"close_codes":{},"close_codes_by_fault":{},"abnormal_closures":0,"pings":0,"pongs":0,"oversized":0,"protocol_errors":0}"#
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let decoded = try decoder.decode(ProtocolStats.self, from: Data(old.utf8))
        #expect(decoded.upgrades == 1 && decoded.calls == 0 && decoded[family: "goaways"].isEmpty)
    }
}
