import Foundation
import Testing

/// `chaos audit` of a QUIC capture with its key log: a real aioquic conversation (Tests/Fixtures/captures/quic/, made
/// by make_quic_captures.py with tcpdump -i lo), each QUIC stream audited as a connection of its own; the same messages
/// over HTTP/3 (`--http3`), each request's stream named by its `:path`.
@Suite("chaos audit of a QUIC capture with its key log", .timeLimit(.minutes(2)))
struct QUICCaptureAuditTests {
    static let folder = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/captures/quic").path

    static func facts(_ fixture: String = "aioquic-lines") throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(fixture).json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test(
        "every stream's messages each way are ok, as the two ends logged reading them; the run passes and says what it opened",
        arguments: [("aioquic-lines", ["--framing", "lines"]), ("aioquic-http3", ["--framing", "http3", "--stream", "query:stream"])]
    )
    func auditsEveryStream(fixture: String, protocolFlags: [String]) async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("quic-audit-\(UUID().uuidString)").path
        let result = try await ChaosCLI.run(
            ["audit", "\(Self.folder)/\(fixture).pcap", "--keylog", "\(Self.folder)/\(fixture).keys"] + protocolFlags
                + ["--ignore-type", "PING", "--out", out]
        )
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("QUIC: 1 connection(s)"), "\(result.stdout)")
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(out)/report.json"))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let streams = try #require(json["streams"] as? [[String: Any]])
        let facts = try Self.facts(fixture)
        var judged = 0
        for (direction, key) in [("upstream", "upstream"), ("downstream", "downstream")] {
            let logged = try #require((facts[key] as? [String: Any])?["seqs_read"] as? [String: [Int]])
            for (name, seqs) in logged {
                let stream = try #require(streams.first { $0["stream"] as? String == name && $0["direction"] as? String == direction })
                #expect(stream["ok"] as? Int == seqs.count, "\(name) \(direction): ok vs the log")
                #expect(stream["delivered"] as? Int == seqs.count, "\(name) \(direction): delivered (acknowledged by QUIC ACKs)")
                #expect(stream["lost"] as? Int == 0 && stream["duplicated"] as? Int == 0, "\(name) \(direction)")
                judged += seqs.count
            }
        }
        #expect(judged == 120, "2 streams × 30 messages each way")
        let extra = json["extra"] as? [String: String] ?? [:]
        #expect(extra["capture.quic_connections"] == "1" && extra["capture.quic_packets_unopened"] == "0", "\(extra)")
        if fixture == "aioquic-http3" {
            let events = try #require(json["protocol_events"] as? [String: Any])
            #expect(events["h3_requests"] as? Int == 2 && (events["h3_statuses"] as? [String: Int]) == ["200": 2], "\(events)")
        }
        try? FileManager.default.removeItem(atPath: out)
    }

    @Test("without the key log nothing is opened: nothing is judged, and the run does not pass")
    func withoutTheKeyLog() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("quic-audit-\(UUID().uuidString)").path
        let result = try await ChaosCLI.run(["audit", "\(Self.folder)/aioquic-lines.pcap", "--framing", "lines", "--out", out])
        #expect(result.status == 1, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("0 sent"), "\(result.stdout)")
        try? FileManager.default.removeItem(atPath: out)
    }
}
