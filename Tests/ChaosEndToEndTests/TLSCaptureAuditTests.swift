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
        /// permessage-deflate (the pair's default) or `--no-deflate`: tshark 4.0 cannot inflate a compressed message sent
        /// in fragments, so only without it do its message texts count (see ``checkWebSocketCounts(_:folder:json:deflate:_:)``).
        var deflate: Bool
        var testDescription: String { name }
    }

    static let websocketPins: [Pins] = [
        Pins(name: "TLS 1.3 TLS_AES_256_GCM_SHA384 (the default), permessage-deflate", flags: [], suite: "0x1302", tls13: true, deflate: true),
        Pins(
            name: "TLS 1.3 TLS_CHACHA20_POLY1305_SHA256",
            flags: ["--tls-cipher", "chacha20", "--no-deflate"],
            suite: "0x1303",
            tls13: true,
            deflate: false
        ),
        Pins(
            name: "TLS 1.2 ECDHE-ECDSA-AES128-GCM-SHA256, permessage-deflate",
            flags: ["--tls-version", "1.2", "--tls-cipher", "aes128"],
            suite: "0xc02b",
            tls13: false,
            deflate: true
        ),
        Pins(
            name: "TLS 1.2 ECDHE-ECDSA-CHACHA20-POLY1305",
            flags: ["--tls-version", "1.2", "--tls-cipher", "chacha20", "--no-deflate"],
            suite: "0xcca9",
            tls13: false,
            deflate: false
        ),
    ]

    @Test(
        "websockets over wss, no proxy, every client cutting its connection in mid-message and resuming: chaos audit --keylog of tcpdump -i lo equals the pair's logs, and tshark with the key log sees the pinned suite and as many messages",
        arguments: websocketPins
    )
    func websocketPair(pins: Pins) async throws {
        let pair = try await LoopbackTLSPair.run(
            .websocket,
            name: "tls-capture-ws",
            seconds: 7,
            clientFlags: pins.flags + ["--reconnect-every", "2.5"]
        )
        var checks = Checks(folder: pair.folder)
        let (folder, result) = try await pair.audit()
        checks.expect(result.status == 0, "a correct pair passes: \(result.stdout)\n\(result.stderr)")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(folder)
        checks.expect(try Self.logsMatch(folder) && lost == 0 && duplicated == 0, "the audit equals the logs, lost \(lost), duplicated \(duplicated)")
        let handshakes = try Self.serverChoices(pair)
        checks.expect(handshakes.count >= 4, "two clients, each cut once and resumed: \(handshakes)")
        checks.expect(handshakes.allSatisfy { $0 == (pins.suite, pins.tls13) }, "\(pins.name): the servers chose \(handshakes)")
        let events = json["protocol_events"] as? [String: Any] ?? [:]
        let abandoned = Self.checkTLSExtra(json, conversations: handshakes.count, &checks)
        // Every WebSocket session the server logged was read in the decrypted bytes. Only a client's last conversation
        // can lack a session (the server logs one once it read the client's HELLO): one that finished its TLS handshake
        // as the run stopped, before its upgrade (s62q2: 8 conversations, 7 sessions), one upgraded and stopped before
        // its HELLO (s65's loop: 8 upgrades decrypted, 7 sessions), or one abandoned in its handshake. The two clients
        // cut and reconnect in step (both every 2.5 s from their start), so the stop can catch both.
        let serverLog = try String(contentsOfFile: pair.folder + "/server.jsonl", encoding: .utf8)
        let sessions = serverLog.components(separatedBy: #""event": "connected""#).count - 1
        let upgrades = events["upgrades"] as? Int ?? 0
        checks.expect(
            sessions <= upgrades && upgrades <= handshakes.count && handshakes.count - sessions <= pair.clients,
            "every session decrypted: \(sessions) sessions, \(handshakes.count) handshakes, \(abandoned) abandoned: \(events)"
        )
        try Self.checkWebSocketCounts(pair, folder: folder, json: json, deflate: pins.deflate, &checks)
        try await Self.checkAutoFraming(pair, json, &checks)
        checks.removeIfPassed()
    }

    @Test("websockets over wss dropping a message on every resume, no proxy: the audit fails and its losses are the logs' holes")
    func websocketPairDroppingOnResume() async throws {
        let pair = try await LoopbackTLSPair.run(
            .websocket,
            name: "tls-capture-ws-drop",
            clientFlags: ["--reconnect-every", "2.5", "--drop-on-resume", "1"],
            serverFlags: ["--drop-on-resume", "1"]
        )
        var checks = Checks(folder: pair.folder)
        let (folder, result) = try await pair.audit()
        checks.expect(result.status == 1, "the pair lost messages: \(result.stdout)\n\(result.stderr)")
        let (lost, _, _) = try ThirdPartyPairRun.compare(folder)
        checks.expect(try Self.logsMatch(folder), "the audit equals the logs")
        // Each client cuts a message in half twice while producing; the resume then drops it.
        checks.expect(lost >= 2, "lost \(lost)")
        let logs = try DeliveredMeansAcknowledgedTests.ConsumerLog.read(pair.folder)
        let holes = logs.values.reduce(0) { $0 + $1.holes.count }
        checks.expect(lost == Int64(holes), "lost \(lost), holes in the logs \(holes)")
        let lostSeqs = try DeliveredMeansAcknowledgedTests.lostSeqs(folder)
        for (key, log) in logs { checks.expect(lostSeqs[key, default: []] == log.holes, "\(key): lost seqs vs log holes") }
        checks.removeIfPassed()
    }

    @Test(
        "grpcio over TLS through a Python TLS terminator, no proxy: chaos audit --keylog equals the pair's logs, and tshark sees the pinned version and as many MSG messages",
        arguments: [
            (["--tls-version", "1.3"], "0x1302", true),
            (["--tls-version", "1.2", "--tls-cipher", "aes128"], "0xc02b", false),
        ]
    )
    func grpcPair(flags: [String], suite: String, tls13: Bool) async throws {
        let pair = try await LoopbackTLSPair.run(.grpc, name: "tls-capture-grpc", seconds: 7, terminatorFlags: flags)
        var checks = Checks(folder: pair.folder)
        let (folder, result) = try await pair.audit()
        checks.expect(result.status == 0, "a correct pair passes: \(result.stdout)\n\(result.stderr)")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(folder)
        checks.expect(try Self.logsMatch(folder) && lost == 0 && duplicated == 0, "the audit equals the logs, lost \(lost), duplicated \(duplicated)")
        let handshakes = try Self.serverChoices(pair)
        checks.expect(!handshakes.isEmpty && handshakes.allSatisfy { $0 == (suite, tls13) }, "\(flags): \(handshakes)")
        let events = json["protocol_events"] as? [String: Any] ?? [:]
        checks.expect((events["calls"] as? Int ?? 0) >= 2, "\(events)")
        _ = Self.checkTLSExtra(json, conversations: handshakes.count, &checks)
        // gRPC messages are per HTTP/2 stream and direction, which tshark reassembles right: MSG messages each way.
        let shark = try Self.tsharkGRPCMessages(pair)
        let decrypted = try Self.sentByDirection(folder)
        checks.expect(
            shark.up > 0 && shark.down > 0 && shark.up == decrypted.up && shark.down == decrypted.down,
            "MSG messages client->server, server->client: tshark \(shark), chaos sent \(decrypted)"
        )
        try await Self.checkAutoFraming(pair, json, &checks)
        checks.removeIfPassed()
    }

    @Test(
        "a chaos run over TLS (a WebSocket pair through a tls: proxy, a partition, a FIN and a reset): chaos audit of a tcpdump -i lo of both legs with the run's keys.log gives the live counts"
    )
    func liveRunAuditedOffline() async throws {
        let run = try await TLSPairTests.run(pair: TLSPairTests.websocket, bug: "", websocket: true, capture: true)
        var checks = Checks(folder: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path)
        defer { try? FileManager.default.removeItem(atPath: run.home) }
        checks.expect(run.status == 0, "the run must pass")
        let text = try String(contentsOfFile: run.scenario, encoding: .utf8)
        let listen = try #require(text.firstMatch(of: /listen: "127\.0\.0\.1:(\d+)"/).map { String($0.1) })
        let tcpdump = URL(fileURLWithPath: run.folder).deletingLastPathComponent().appendingPathComponent("lo.pcap").path
        let out = "\(run.folder)-tcpdump"
        let offline = try await ChaosCLI.run(
            [
                "audit", tcpdump, "--keylog", "\(run.folder)/keys.log", "--protocol-from", run.scenario,
                "--proxy-port", listen, "--out", out,
            ],
            timeout: 120
        )
        checks.expect(offline.status == 0, "\(offline.stdout)\n\(offline.stderr)")
        let live = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        let audited = try DeliveredMeansAcknowledgedTests.streams(out)
        checks.expect(live.count == 4 && audited.count == 4, "c1, c2 each way: live \(live.keys.sorted()), offline \(audited.keys.sorted())")
        for (key, stream) in live {
            for count in ["delivered", "ok", "lost", "duplicated", "redelivered"] {
                checks.expect(
                    audited[key]?[count] == stream[count],
                    "\(key) \(count): offline \(audited[key]?[count] ?? -1), live \(stream[count] ?? -1)"
                )
            }
            // As in CaptureAuditTests: the wire carries messages the proxy never read (written just before a fault cut
            // that leg, acknowledged by the proxy's kernel, discarded unread), so `sent` may differ by a few; what was
            // delivered is exact. `recovered` is not compared: whether the partition's held messages count as recovered
            // differs between a live audit and a capture's even in cleartext (this scenario without tls: live 0 on
            // every stream, a tcpdump of it about 95 on each).
            let difference = abs((audited[key]?["sent"] ?? 0) - (stream["sent"] ?? 0))
            checks.expect(difference <= 4, "\(key) sent: offline \(audited[key]?["sent"] ?? -1), live \(stream["sent"] ?? -1)")
        }
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        checks.expect(counts["protocol"] == nil && counts["undecodable"] == nil, "no protocol errors: \(counts)")
        let extra = json["extra"] as? [String: String] ?? [:]
        checks.expect(
            extra["capture.tls_conversations"] != nil && extra["capture.tls_conversations"] == extra["capture.tls_decrypted"],
            "both legs of every connection decrypted: \(extra)"
        )
        checks.removeIfPassed()
    }

    /// What a fixture's NAME.json says (make_tls_captures.py).
    struct Fixture: Decodable {
        struct Direction: Decodable {
            var lines: Int
            var bytes: Int
            var seqs: [Int]
            var holes: [Int]
            var repeated: [Int]
        }

        var name: String
        var clientRandom: String
        var upstream: Direction
        var downstream: Direction

        static func load(_ name: String) throws -> Fixture {
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            return try decoder.decode(Fixture.self, from: Data(contentsOf: URL(fileURLWithPath: "\(TLSCaptureAuditTests.fixtures)/\(name).json")))
        }
    }

    static let fixtureNames = [
        "tls13-aes128gcm", "tls13-aes256gcm", "tls13-chacha20", "tls12-aes128gcm", "tls12-aes256gcm",
        "tls12-chacha20", "tls13-keyupdate",
    ]

    @Test(
        "each committed TLS capture (Python ssl and openssl s_client, TLS 1.3 and 1.2, AES-GCM and ChaCha20, KeyUpdates) audits with its key log to the lines, holes and repeats its JSON file says",
        arguments: fixtureNames
    )
    func fixture(name: String) async throws {
        let fixture = try Fixture.load(name)
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tls-fixture-\(name)-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try await ChaosCLI.run([
            "audit", "\(Self.fixtures)/\(name).pcap", "--keylog", "\(Self.fixtures)/\(name).keys",
            "--out", out,
        ])
        // No scenario, so no expectations: the verdict passes whatever the counts.
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let streams = try DeliveredMeansAcknowledgedTests.streams(out)
        for (direction, expected) in [("upstream", fixture.upstream), ("downstream", fixture.downstream)] {
            let stream = try #require(streams["c1/\(direction)"], "\(direction) in \(streams.keys.sorted())")
            #expect(stream["ok"] == Int64(Set(expected.seqs).count), "\(name) \(direction) ok")
            #expect(stream["lost"] == Int64(expected.holes.count), "\(name) \(direction) lost")
            #expect(stream["duplicated"] == Int64(expected.repeated.count), "\(name) \(direction) duplicated")
        }
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        var checks = Checks(folder: out)
        _ = Self.checkTLSExtra(json, conversations: 1, &checks)
        let extra = json["extra"] as? [String: String] ?? [:]
        #expect(extra["capture.tls_plaintext_bytes"] == "\(fixture.upstream.bytes + fixture.downstream.bytes)", "\(extra)")
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "\(name): \(counts)")
    }

    @Test(
        "a TLS capture with a key log that lacks its client random: a protocol anomaly names the client random, nothing is audited, the verdict is ERROR (exit 2)"
    )
    func wrongKeylog() async throws {
        let fixture = try Fixture.load("tls13-aes128gcm")
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("tls-fixture-nokeys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try await ChaosCLI.run([
            "audit", "\(Self.fixtures)/tls13-aes128gcm.pcap", "--keylog",
            "\(Self.fixtures)/tls12-aes128gcm.keys", "--out", out,
        ])
        #expect(result.status == 2, "\(result.stdout)\n\(result.stderr)")
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        #expect(json["verdict"] as? String == "error")
        let anomalies = json["anomalies"] as? [[String: Any]] ?? []
        #expect(
            anomalies.contains {
                $0["class"] as? String == "protocol"
                    && ($0["detail"] as? String ?? "").contains("no keys for client random \(fixture.clientRandom)")
            },
            "\(anomalies.prefix(3))"
        )
        let extra = json["extra"] as? [String: String] ?? [:]
        #expect(
            extra["capture.tls_conversations"] == "1" && extra["capture.tls_decrypted"] == "0" && extra["capture.tls_failed"] == "1",
            "\(extra)"
        )
        let streams = try DeliveredMeansAcknowledgedTests.streams(out)
        #expect(streams.values.allSatisfy { ($0["delivered"] ?? 0) == 0 }, "\(streams)")
    }

    // MARK: - What tshark and the report say

    /// Every ServerHello of the capture: the cipher suite (`0x1302`) and whether it chose TLS 1.3.
    /// `framing: auto` picks the pair's protocol from each conversation's ALPN (http/1.1 or h2): the same totals and
    /// streams as the framing named outright.
    static func checkAutoFraming(_ pair: LoopbackTLSPair, _ named: [String: Any], _ checks: inout Checks) async throws {
        let (folder, result) = try await pair.audit(name: "audit-auto", scenario: try pair.autoFramingScenario())
        checks.expect(result.status == 0, "framing auto: \(result.stdout)\n\(result.stderr)")
        let auto = try DeliveredMeansAcknowledgedTests.reportJSON(folder)
        checks.expect(
            NSDictionary(dictionary: auto["totals"] as? [String: Any] ?? [:])
                .isEqual(to: named["totals"] as? [String: Any] ?? ["none": 0]),
            "framing auto totals \(auto["totals"] ?? "none") vs \(named["totals"] ?? "none")"
        )
        checks.expect(
            NSArray(array: auto["streams"] as? [Any] ?? []).isEqual(to: named["streams"] as? [Any] ?? [0]),
            "framing auto streams equal the named framing's"
        )
    }

    static func serverChoices(_ pair: LoopbackTLSPair) throws -> [(String, Bool)] {
        let shark = try ChaosCLI.runBlocking(
            ["tshark", "-r", pair.capture] + TsharkDecodeAs.arguments(pair.capture, as: "tls")
                + [
                    "-Y", "tls.handshake.type == 2", "-T", "fields",
                    "-e", "tls.handshake.ciphersuite", "-e", "tls.handshake.extensions.supported_version",
                ],
            timeout: 60,
            program: "/usr/bin/env"
        )
        #expect(shark.status == 0, "\(shark.stderr)")
        return shark.stdout.split(separator: "\n").map { row in
            let fields = row.split(separator: "\t", omittingEmptySubsequences: false)
            return (fields[0].lowercased(), fields.count > 1 && fields[1].contains("0x0304"))
        }
    }

    /// tshark with the key log: WebSocket text messages of type MSG, client to server and server to client.
    static func tsharkWebSocketMessages(_ pair: LoopbackTLSPair) throws -> (up: Int, down: Int) {
        let rows = try tsharkFields(pair, filter: "websocket", fields: ["websocket.payload.text"])
        var up = 0
        var down = 0
        for (fromServer, values) in rows {
            let count = values[0].matches(of: /"type": "MSG"/).count
            if fromServer { down += count } else { up += count }
        }
        return (up, down)
    }

    /// tshark with the key log: gRPC messages whose `kind` (field 5 of RaceRequest, 7 of RaceUpdate) is MSG, client to
    /// server and server to client (no schema: a length-delimited field value of the bytes "MSG").
    static func tsharkGRPCMessages(_ pair: LoopbackTLSPair) throws -> (up: Int, down: Int) {
        let rows = try tsharkFields(pair, filter: "grpc", fields: ["protobuf.field.value"])
        var up = 0
        var down = 0
        for (fromServer, values) in rows {
            let count = values[0].split(separator: "|").filter { $0 == "4d5347" }.count
            if fromServer { down += count } else { up += count }
        }
        return (up, down)
    }

    /// Rows of (from the server?, for each of `fields` every occurrence joined by `|`) for the packets matching `filter`,
    /// tshark decrypting with the pair's key log.
    static func tsharkFields(_ pair: LoopbackTLSPair, filter: String, fields: [String]) throws -> [(Bool, [String])] {
        let shark = try ChaosCLI.runBlocking(
            ["tshark", "-r", pair.capture] + TsharkDecodeAs.arguments(pair.capture, as: "tls")
                + [
                    "-o", "tls.keylog_file:\(pair.keylog)", "-Y", filter,
                    "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-e", "tcp.srcport",
                ]
                + fields.flatMap { ["-e", $0] },
            timeout: 120,
            program: "/usr/bin/env"
        )
        #expect(shark.status == 0, "\(shark.stderr)")
        return shark.stdout.split(separator: "\n").compactMap { row in
            let values = row.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard values.count == fields.count + 1, let port = Int(values[0]) else { return nil }
            return (port == pair.port, Array(values.dropFirst()))
        }
    }

    /// The audit's messages sent (or another count of its streams), summed over streams, client to server and server to
    /// client.
    static func sentByDirection(_ folder: String, count: String = "sent") throws -> (up: Int, down: Int) {
        let streams = try DeliveredMeansAcknowledgedTests.streams(folder)
        let sum = { (direction: String) in
            Int(streams.filter { $0.key.hasSuffix("/\(direction)") }.values.reduce(0) { $0 + ($1[count] ?? 0) })
        }
        return (sum("upstream"), sum("downstream"))
    }

    /// The report's `extra` counts every TLS conversation of the capture, and says each was decrypted.
    /// Checks the report's TLS counts: `conversations` in all, every one decrypted but those abandoned in the handshake
    /// (a client stopped while it reconnected, as the test ended: at most one per client); returns how many were.
    @discardableResult
    static func checkTLSExtra(_ json: [String: Any], conversations: Int, _ checks: inout Checks) -> Int {
        let extra = json["extra"] as? [String: String] ?? [:]
        let abandoned = Int(extra["capture.tls_abandoned"] ?? "") ?? -1
        checks.expect(
            extra["capture.tls_conversations"] == "\(conversations)" && (0...2).contains(abandoned)
                && extra["capture.tls_decrypted"] == "\(conversations - abandoned)" && (extra["capture.tls_failed"] ?? "0") == "0",
            "\(conversations) TLS conversations, all decrypted but at most two abandoned: \(extra)"
        )
        return max(abandoned, 0)
    }

    /// tshark's WebSocket count against chaos's. tshark 4.0 reassembles a fragmented message per conversation, not per
    /// direction: when both ends send fragmented messages at once, a message's text holds the other direction's
    /// fragments too (`{"type": "MSG", "n": 35, "p{"type": "MSG", "seq": 35, "ayload"…`), and with permessage-deflate
    /// it cannot inflate them at all. What it reads right is each frame's header: the data messages each way (frames
    /// with FIN of opcode text, binary or continuation) equal what chaos decoded, its MSGs (`sent`) and the messages
    /// it ignored (HELLO, WELCOME, ACK: `messages.ignored`, counted once as read from the producer and once as written
    /// to the consumer); and without deflate the MSG texts, wherever tshark puts them, add up to chaos's `sent`, plus at
    /// most its `truncated`: a client cut in mid-message leaves the head of a frame (`{"type": "MSG", "seq": 82, `) that
    /// tshark glues into the other direction's next text, and whether the head holds the MSG marker depends on where the
    /// cut fell (a fresh-clone run saw 189 texts down against 188 sent, with 2 truncated).
    static func checkWebSocketCounts(
        _ pair: LoopbackTLSPair,
        folder: String,
        json: [String: Any],
        deflate: Bool,
        _ checks: inout Checks
    ) throws {
        let frames = try tsharkWebSocketDataMessages(pair)
        let decrypted = try sentByDirection(folder)
        let truncated = try sentByDirection(folder, count: "truncated")
        let ignored = ((json["messages"] as? [String: Any])?["ignored"] as? Int) ?? -1
        let decoded = decrypted.up + decrypted.down + ignored / 2
        checks.expect(
            frames.up > 0 && frames.down > 0
                && (decoded...(decoded + truncated.up + truncated.down)).contains(frames.up + frames.down),
            "WebSocket data messages: tshark \(frames) (both ways \(frames.up + frames.down)), chaos sent \(decrypted) + ignored \(ignored) / 2, truncated \(truncated)"
        )
        if !deflate {
            let texts = try tsharkWebSocketMessages(pair)
            let sent = decrypted.up + decrypted.down
            checks.expect(
                (sent...(sent + truncated.up + truncated.down)).contains(texts.up + texts.down),
                "MSG texts: tshark \(texts), chaos sent \(decrypted) and truncated \(truncated)"
            )
        }
    }

    /// tshark with the key log: complete WebSocket data messages (a frame with FIN, opcode 0, 1 or 2) each way.
    static func tsharkWebSocketDataMessages(_ pair: LoopbackTLSPair) throws -> (up: Int, down: Int) {
        let rows = try tsharkFields(pair, filter: "websocket", fields: ["websocket.opcode", "websocket.fin"])
        var up = 0
        var down = 0
        for (fromServer, values) in rows {
            for (code, fin) in zip(values[0].split(separator: "|"), values[1].split(separator: "|"))
            where ["0", "1", "2"].contains(code) && (fin == "1" || fin == "True") {
                if fromServer { down += 1 } else { up += 1 }
            }
        }
        return (up, down)
    }

    /// Whether every stream's ok, lost, duplicated and redelivered equal the logs (what ``ThirdPartyPairRun/compare(_:oneWay:)``
    /// expects, as a value: a test keeps its folder when they differ).
    static func logsMatch(_ folder: String) throws -> Bool {
        let logs = try DeliveredMeansAcknowledgedTests.ConsumerLog.read(folder)
        let streams = try DeliveredMeansAcknowledgedTests.streams(folder)
        return !logs.isEmpty && logs.count == streams.count
            && logs.allSatisfy { key, log in
                let stream = streams[key] ?? [:]
                return stream["ok"] == Int64(log.distinct.count) && stream["lost"] == Int64(log.holes.count)
                    && stream["duplicated"] == Int64(log.duplicated) && stream["redelivered"] == Int64(log.redelivered)
            }
    }

    /// `#expect`s that remember whether one failed: a test removes its folder only when all passed (its path is in
    /// every failure).
    struct Checks {
        let folder: String
        private(set) var failed = false

        init(folder: String) { self.folder = folder }

        mutating func expect(
            _ condition: Bool,
            _ comment: @autoclosure () -> String,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            if !condition { failed = true }
            #expect(condition, "\(comment()) (\(folder))", sourceLocation: sourceLocation)
        }

        func removeIfPassed() {
            if !failed { try? FileManager.default.removeItem(atPath: folder) }
        }
    }
}
