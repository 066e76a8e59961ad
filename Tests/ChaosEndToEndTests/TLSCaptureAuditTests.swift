import Foundation
import Testing

/// `chaos audit CAPTURE --keylog FILE` (issue 23, PRODUCT.md section 9): a TLS capture taken anywhere, decrypted with
/// the key log its client wrote, audits as the pair's own logs say, with no chaos proxy in the path. The pairs are real
/// third-party stacks on loopback (LoopbackTLSPair): Python `websockets` over wss, the client's OpenSSL writing the key
/// log, for TLS 1.3 and 1.2 with AES-GCM and ChaCha20-Poly1305, correct and dropping on resume; grpcio's BoringSSL
/// client through tls_terminator.py (Python's OpenSSL, which writes the key log) for TLS 1.3 and 1.2. tshark, given the
/// same key log, sees the suite the test pinned and the same number of messages as chaos decrypted. A `chaos run` over
/// TLS, audited offline from a `tcpdump -i lo` of both legs and the run's keys.log, gives the live counts. And the
/// committed captures of Tests/Fixtures/captures/tls (make_tls_captures.py) audit to what their JSON files say.
@Suite("TLS capture audit: chaos audit --keylog of a TLS capture equals the pair's logs", .serialized, .timeLimit(.minutes(3)))
struct TLSCaptureAuditTests {
    static let fixtures = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/captures/tls").path

    /// A WebSocket case: the client's TLS flags (pair_tls.py) and what the server must have chosen.
    struct Pins: CustomTestStringConvertible, Sendable {
        var name: String
        var flags: [String]
        /// The cipher suite's code point, as tshark prints it (`0x1302`).
        var suite: String
        var tls13: Bool
        /// `--no-deflate`: tshark 4.0 cannot inflate a compressed message sent in fragments, so only then does it read
        /// every message's text (and the message counts are compared).
        var deflate: Bool
        var testDescription: String { name }
    }

    static let websocketPins: [Pins] = [
        Pins(name: "TLS 1.3 TLS_AES_256_GCM_SHA384 (the default), permessage-deflate", flags: [], suite: "0x1302", tls13: true, deflate: true),
        Pins(name: "TLS 1.3 TLS_CHACHA20_POLY1305_SHA256", flags: ["--tls-cipher", "chacha20", "--no-deflate"], suite: "0x1303",
             tls13: true, deflate: false),
        Pins(name: "TLS 1.2 ECDHE-ECDSA-AES128-GCM-SHA256, permessage-deflate", flags: ["--tls-version", "1.2", "--tls-cipher", "aes128"],
             suite: "0xc02b", tls13: false, deflate: true),
        Pins(name: "TLS 1.2 ECDHE-ECDSA-CHACHA20-POLY1305", flags: ["--tls-version", "1.2", "--tls-cipher", "chacha20", "--no-deflate"],
             suite: "0xcca9", tls13: false, deflate: false),
    ]

    @Test("websockets over wss, no proxy, every client cutting its connection in mid-message and resuming: chaos audit --keylog of tcpdump -i lo equals the pair's logs, and tshark with the key log sees the pinned suite and the same messages",
          arguments: websocketPins)
    func websocketPair(pins: Pins) async throws {
        let pair = try await LoopbackTLSPair.run(.websocket, name: "tls-capture-ws", clientFlags: pins.flags + ["--reconnect-every", "3"])
        let (folder, result) = try await pair.audit()
        #expect(result.status == 0, "a correct pair passes (\(pair.folder)): \(result.stdout)\n\(result.stderr)")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(folder)
        #expect(lost == 0 && duplicated == 0)
        let handshakes = try Self.serverChoices(pair)
        #expect(handshakes.count >= 4, "two clients, each cut once and resumed: \(handshakes)")
        #expect(handshakes.allSatisfy { $0 == (pins.suite, pins.tls13) }, "\(pins.name): the servers chose \(handshakes)")
        let events = json["protocol_events"] as? [String: Any] ?? [:]
        #expect((events["upgrades"] as? Int ?? 0) == handshakes.count, "every conversation decrypted: \(events)")
        try Self.checkTLSExtra(json, conversations: handshakes.count)
        if !pins.deflate {
            let shark = try Self.tsharkWebSocketMessages(pair)
            let decrypted = try Self.sentByDirection(folder)
            #expect(shark.up > 0 && shark.down > 0)
            #expect(shark.up == decrypted.up && shark.down == decrypted.down,
                    "MSG messages client->server, server->client: tshark \(shark), chaos \(decrypted) (\(pair.folder))")
        }
        if result.status == 0, lost == 0 { pair.remove() }
    }

    @Test("websockets over wss dropping a message on every resume, no proxy: the audit fails and its losses are the logs' holes")
    func websocketPairDroppingOnResume() async throws {
        let pair = try await LoopbackTLSPair.run(.websocket, name: "tls-capture-ws-drop",
                                                 clientFlags: ["--reconnect-every", "2.5", "--drop-on-resume", "1"],
                                                 serverFlags: ["--drop-on-resume", "1"])
        let (folder, result) = try await pair.audit()
        #expect(result.status == 1, "the pair lost messages (\(pair.folder)): \(result.stdout)\n\(result.stderr)")
        let (lost, _, _) = try ThirdPartyPairRun.compare(folder)
        // Each client cuts a message in half twice while producing; the resume then drops it.
        #expect(lost >= 2, "lost \(lost) (\(pair.folder))")
        let logs = try DeliveredMeansAcknowledgedTests.ConsumerLog.read(pair.folder)
        let holes = logs.values.reduce(0) { $0 + $1.holes.count }
        #expect(lost == Int64(holes), "lost \(lost), holes in the logs \(holes)")
        let lostSeqs = try DeliveredMeansAcknowledgedTests.lostSeqs(folder)
        for (key, log) in logs { #expect(lostSeqs[key, default: []] == log.holes, "\(key): lost seqs vs log holes") }
        if result.status == 1, lost == Int64(holes) { pair.remove() }
    }

    @Test("grpcio over TLS through a Python TLS terminator, no proxy: chaos audit --keylog equals the pair's logs, and tshark sees the pinned version and as many MSG messages", arguments: [
        (["--tls-version", "1.3"], "0x1302", true),
        (["--tls-version", "1.2", "--tls-cipher", "aes128"], "0xc02b", false),
    ])
    func grpcPair(flags: [String], suite: String, tls13: Bool) async throws {
        let pair = try await LoopbackTLSPair.run(.grpc, name: "tls-capture-grpc", terminatorFlags: flags)
        let (folder, result) = try await pair.audit()
        #expect(result.status == 0, "a correct pair passes (\(pair.folder)): \(result.stdout)\n\(result.stderr)")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(folder)
        #expect(lost == 0 && duplicated == 0)
        let handshakes = try Self.serverChoices(pair)
        #expect(!handshakes.isEmpty && handshakes.allSatisfy { $0 == (suite, tls13) }, "\(flags): \(handshakes)")
        let events = json["protocol_events"] as? [String: Any] ?? [:]
        #expect((events["calls"] as? Int ?? 0) >= 2, "\(events)")
        try Self.checkTLSExtra(json, conversations: handshakes.count)
        let shark = try Self.tsharkGRPCMessages(pair)
        let decrypted = try Self.sentByDirection(folder)
        #expect(shark.up > 0 && shark.down > 0)
        #expect(shark.up == decrypted.up && shark.down == decrypted.down,
                "MSG messages client->server, server->client: tshark \(shark), chaos \(decrypted) (\(pair.folder))")
        if result.status == 0, lost == 0 { pair.remove() }
    }

    @Test("a chaos run over TLS (a WebSocket pair through a tls: proxy, a partition, a FIN and a reset): chaos audit of a tcpdump -i lo of both legs with the run's keys.log gives the live counts")
    func liveRunAuditedOffline() async throws {
        let run = try await TLSPairTests.run(pair: TLSPairTests.websocket, bug: "", websocket: true, capture: true)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let text = try String(contentsOfFile: run.scenario, encoding: .utf8)
        let listen = try #require(text.firstMatch(of: /listen: "127\.0\.0\.1:(\d+)"/).map { String($0.1) })
        let tcpdump = URL(fileURLWithPath: run.folder).deletingLastPathComponent().appendingPathComponent("lo.pcap").path
        let out = "\(run.folder)-tcpdump"
        let offline = try await ChaosCLI.run(["audit", tcpdump, "--keylog", "\(run.folder)/keys.log", "--protocol-from", run.scenario,
                                              "--proxy-port", listen, "--out", out], timeout: 120)
        #expect(offline.status == 0, "\(offline.stdout)\n\(offline.stderr)")
        let live = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        let audited = try DeliveredMeansAcknowledgedTests.streams(out)
        #expect(live.count == 4 && audited.count == 4, "c1, c2 each way: live \(live.keys.sorted()), offline \(audited.keys.sorted())")
        var same = true
        for (key, stream) in live {
            for count in ["delivered", "ok", "lost", "duplicated", "redelivered"] {
                #expect(audited[key]?[count] == stream[count], "\(key) \(count): offline \(audited[key]?[count] ?? -1), live \(stream[count] ?? -1)")
                same = same && audited[key]?[count] == stream[count]
            }
            // As in CaptureAuditTests: the wire carries messages the proxy never read (written just before a fault cut
            // that leg, acknowledged by the proxy's kernel, discarded unread), and a capture orders the events of
            // different connections by packet time; what was delivered is exact.
            for count in ["sent", "recovered"] {
                let difference = abs((audited[key]?[count] ?? 0) - (stream[count] ?? 0))
                #expect(difference <= 4, "\(key) \(count): offline \(audited[key]?[count] ?? -1), live \(stream[count] ?? -1)")
            }
        }
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "no protocol errors: \(counts)")
        if same { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path) }
        try? FileManager.default.removeItem(atPath: run.home)
    }

    /// What a fixture's NAME.json says (make_tls_captures.py).
    struct Fixture: Decodable {
        struct Direction: Decodable {
            var lines: Int
            var seqs: [Int]
            var holes: [Int]
            var repeated: [Int]
        }

        var name: String
        var upstream: Direction
        var downstream: Direction
    }

    static let fixtureNames = ["tls13-aes128gcm", "tls13-aes256gcm", "tls13-chacha20", "tls12-aes128gcm", "tls12-aes256gcm",
                               "tls12-chacha20", "tls13-keyupdate"]

    @Test("each committed TLS capture (Python ssl and openssl s_client, TLS 1.3 and 1.2, AES-GCM and ChaCha20, KeyUpdates) audits with its key log to the lines, holes and repeats its JSON file says",
          arguments: fixtureNames)
    func fixture(name: String) async throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(Self.fixtures)/\(name).json"))
        let fixture = try JSONDecoder().decode(Fixture.self, from: data)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tls-fixture-\(name)-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try await ChaosCLI.run(["audit", "\(Self.fixtures)/\(name).pcap", "--keylog", "\(Self.fixtures)/\(name).keys",
                                             "--out", out])
        let flawed = !fixture.downstream.holes.isEmpty || !fixture.downstream.repeated.isEmpty
        #expect(result.status == (flawed ? 1 : 0), "\(result.stdout)\n\(result.stderr)")
        let streams = try DeliveredMeansAcknowledgedTests.streams(out)
        for (direction, expected) in [("upstream", fixture.upstream), ("downstream", fixture.downstream)] {
            let stream = try #require(streams["c1/\(direction)"], "\(direction) in \(streams.keys.sorted())")
            #expect(stream["ok"] == Int64(Set(expected.seqs).count), "\(name) \(direction) ok")
            #expect(stream["lost"] == Int64(expected.holes.count), "\(name) \(direction) lost")
            #expect(stream["duplicated"] == Int64(expected.repeated.count), "\(name) \(direction) duplicated")
        }
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        try Self.checkTLSExtra(json, conversations: 1)
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "\(name): \(counts)")
    }

    @Test("a TLS capture with a key log that lacks its client random: a protocol anomaly says so, nothing is audited as delivered")
    func wrongKeylog() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tls-fixture-nokeys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try await ChaosCLI.run(["audit", "\(Self.fixtures)/tls13-aes128gcm.pcap", "--keylog",
                                             "\(Self.fixtures)/tls12-aes128gcm.keys", "--out", out])
        #expect(result.status != 2, "a conversation without keys is an anomaly, not a bad capture: \(result.stdout)\n\(result.stderr)")
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        let anomalies = json["anomalies"] as? [[String: Any]] ?? []
        let tls = anomalies.filter { $0["class"] as? String == "protocol" }
        #expect(tls.contains { ($0["detail"] as? String ?? "").localizedCaseInsensitiveContains("key") }, "\(anomalies.prefix(3))")
        let streams = try DeliveredMeansAcknowledgedTests.streams(out)
        #expect(streams.values.allSatisfy { ($0["delivered"] ?? 0) == 0 }, "\(streams)")
    }

    // MARK: - What tshark and the report say

    /// Every ServerHello of the capture: the cipher suite (`0x1302`) and whether it chose TLS 1.3.
    static func serverChoices(_ pair: LoopbackTLSPair) throws -> [(String, Bool)] {
        let shark = try ChaosCLI.runBlocking(["tshark", "-r", pair.capture, "-Y", "tls.handshake.type == 2", "-T", "fields",
                                              "-e", "tls.handshake.ciphersuite", "-e", "tls.handshake.extensions.supported_version"],
                                             timeout: 60, program: "/usr/bin/env")
        #expect(shark.status == 0, "\(shark.stderr)")
        return shark.stdout.split(separator: "\n").map { row in
            let fields = row.split(separator: "\t", omittingEmptySubsequences: false)
            return (fields[0].lowercased(), fields.count > 1 && fields[1].contains("0x0304"))
        }
    }

    /// tshark with the key log: WebSocket text messages of type MSG, client to server and server to client.
    static func tsharkWebSocketMessages(_ pair: LoopbackTLSPair) throws -> (up: Int, down: Int) {
        let rows = try tsharkFields(pair, filter: "websocket", field: "websocket.payload.text")
        var up = 0, down = 0
        for (fromServer, value) in rows {
            let count = value.matches(of: /"type": "MSG"/).count
            if fromServer { down += count } else { up += count }
        }
        return (up, down)
    }

    /// tshark with the key log: gRPC messages whose `kind` (field 5 of RaceRequest, 7 of RaceUpdate) is MSG, client to
    /// server and server to client (no schema: a length-delimited field value of the bytes "MSG").
    static func tsharkGRPCMessages(_ pair: LoopbackTLSPair) throws -> (up: Int, down: Int) {
        let rows = try tsharkFields(pair, filter: "grpc", field: "protobuf.field.value")
        var up = 0, down = 0
        for (fromServer, value) in rows {
            let count = value.split(separator: "|").filter { $0 == "4d5347" }.count
            if fromServer { down += count } else { up += count }
        }
        return (up, down)
    }

    /// Rows of (from the server?, every occurrence of `field` joined by `|`) for the packets matching `filter`.
    static func tsharkFields(_ pair: LoopbackTLSPair, filter: String, field: String) throws -> [(Bool, String)] {
        let shark = try ChaosCLI.runBlocking(["tshark", "-r", pair.capture, "-o", "tls.keylog_file:\(pair.keylog)", "-Y", filter,
                                              "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-e", "tcp.srcport",
                                              "-e", field], timeout: 120, program: "/usr/bin/env")
        #expect(shark.status == 0, "\(shark.stderr)")
        return shark.stdout.split(separator: "\n").compactMap { row in
            let fields = row.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
            guard fields.count == 2, let port = Int(fields[0]) else { return nil }
            return (port == pair.port, String(fields[1]))
        }
    }

    /// The audit's messages sent, summed over streams, client to server and server to client.
    static func sentByDirection(_ folder: String) throws -> (up: Int, down: Int) {
        let streams = try DeliveredMeansAcknowledgedTests.streams(folder)
        let sum = { (direction: String) in
            Int(streams.filter { $0.key.hasSuffix("/\(direction)") }.values.reduce(0) { $0 + ($1["sent"] ?? 0) })
        }
        return (sum("upstream"), sum("downstream"))
    }

    /// The report's `extra` counts every TLS conversation of the capture, and says each was decrypted.
    static func checkTLSExtra(_ json: [String: Any], conversations: Int) throws {
        let extra = json["extra"] as? [String: String] ?? [:]
        #expect(extra["capture.tls_conversations"] == "\(conversations)", "\(extra)")
        #expect(extra["capture.tls_decrypted"] == "\(conversations)", "\(extra)")
    }
}
