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

    @Test(
        "the same conversation through a proxy (each datagram on both legs: through_proxy.py), and with the proxy's server leg moved mid-way: the legs are paired, the moved one followed by the connection IDs it carries, and every stream audits as on the ends' own path",
        arguments: [0, 12]
    )
    func throughAProxy(moveAfter: Int) async throws {
        let port = try #require(try Self.facts()["server_port"] as? Int)
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("quic-proxied-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let made = try await ChaosCLI.run(
            [
                "python3", "\(Self.folder)/through_proxy.py", "\(Self.folder)/aioquic-lines.pcap", "\(work)/proxied.pcap",
                "--server-port", "\(port)", "--proxy-port", "40400", "--move-after", "\(moveAfter)",
            ],
            // A guard against a hang, not a time limit: scapy's 3 CPU seconds took over 60 s beside the other lanes of
            // a fresh-clone run (s61bq1, killed).
            timeout: 600,
            program: "/usr/bin/env"
        )
        try #require(made.status == 0, "\(made.stdout)\n\(made.stderr)")
        #expect(made.stdout.contains("the server leg moved: \(moveAfter > 0 ? "True" : "False")"), "\(made.stdout)")
        var totals: [String: [String: Int]] = [:]
        for (name, capture) in [("direct", "\(Self.folder)/aioquic-lines.pcap"), ("proxied", "\(work)/proxied.pcap")] {
            let out = "\(work)/\(name)"
            let result = try await ChaosCLI.run(
                ["audit", capture, "--keylog", "\(Self.folder)/aioquic-lines.keys", "--framing", "lines", "--ignore-type", "PING", "--out", out]
            )
            #expect(result.status == 0, "\(name): \(result.stdout)\n\(result.stderr)")
            #expect(result.stdout.contains("QUIC: 1 connection(s)"), "\(name): the legs paired: \(result.stdout)")
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(out)/report.json"))
            let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let extra = json["extra"] as? [String: String] ?? [:]
            #expect(extra["capture.quic_packets_unopened"] == "0", "\(name): \(extra)")
            for stream in try #require(json["streams"] as? [[String: Any]]) {
                let key = "\(stream["stream"] as? String ?? "")/\(stream["direction"] as? String ?? "")"
                totals[name, default: [:]][key + " ok"] = stream["ok"] as? Int
                totals[name, default: [:]][key + " lost"] = stream["lost"] as? Int
                totals[name, default: [:]][key + " duplicated"] = stream["duplicated"] as? Int
            }
        }
        #expect(totals["direct"]?.count == 12 && totals["direct"]?.filter { $0.key.hasSuffix(" ok") }.values.allSatisfy { $0 == 30 } == true)
        #expect(totals["proxied"] == totals["direct"], "through the proxy as on the ends' own path: \(totals)")
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
