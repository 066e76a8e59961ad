import Foundation
import Testing

/// Real third-party TLS peers through a proxy with `tls:` (PRODUCT.md section 9): Python's ssl module (OpenSSL) on
/// both ends, the upstream with a certificate of its own CA (PyPI `trustme`, Tests/Fixtures/pairs/test_certs.py),
/// the client trusting chaos's CA (made under a fresh `CHAOS_HOME`). Through a partition and disconnects the audit
/// of the decrypted streams equals what the pair's consumers logged: the NDJSON pair (asyncio streams) correct and
/// dropping on resume, and the WebSocket pair over wss (`websockets`, permessage-deflate). The run's keys.log lets
/// tshark decrypt a `tcpdump -i lo` of both legs.
@Suite("TLS pair: the audit of a TLS pair equals the pair's own logs", .serialized, .timeLimit(.minutes(3)))
struct TLSPairTests {
    static let lines = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/resumable_pair.py").path
    static let websocket = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/resumable_ws_pair.py").path
    static let certs = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/test_certs.py").path

    /// A fresh CHAOS_HOME and the upstream's certificates in one folder.
    static func folder() throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("tls-pair-\(UUID().uuidString)").path
        let made = try ChaosCLI.runBlocking(["python3", certs, base], timeout: 30, program: "/usr/bin/env")
        #expect(made.status == 0, "\(made.stderr)")
        return base
    }

    static func scenario(
        listen: Int,
        upstream: Int,
        pair: String,
        home: String,
        bug: String,
        websocket: Bool,
        clientTrusts: String = "ca.pem"
    ) -> String {
        let common = "--send-for 11 --heartbeat 1 --timeout 2.5 \(bug)"
        let server = "--tls-cert \(home)/server.pem"
        let client = "--tls-ca \(home)/\(clientTrusts) --server-name localhost"
        // A client that refuses chaos's leaf never connects through the proxy: its timeline starts with the proxy's.
        let ready = clientTrusts == "ca.pem" ? "ready: connected" : "# (no ready: its TLS handshakes all fail)"
        let protocolBlock =
            websocket
            ? """
              framing: websocket
              stream: header:x-stream
              seq: seq
              ack: ack
              ignore: {type: [HELLO, WELCOME, ACK]}
              downstream: {seq: n}
            """
            : """
              framing: lines
              seq: seq
              stream: stream
              ack: ack
              ignore: {type: [PING, PONG, HELLO, WELCOME, ACK]}
            """
        return """
            name: tls-pair
            duration: 16s
            seed: 7
            proxies:
              - name: stream
                listen: "127.0.0.1:\(listen)"
                upstream: "127.0.0.1:\(upstream)"
                tls: {upstream: \(home)/upstream-ca.pem}
            pair:
              server:
                run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl \(server) \(common)
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 1s
              client:
                run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --stream c{index} --log {run_dir}/client-{index}.jsonl \(client) \(common)
                count: 2
                \(ready)
                stop_grace: 1s
            protocol:
            \(protocolBlock)
            faults:
              - partition: {at: 2s, for: 4s, direction: both}
              - disconnect: {at: 8s, mode: close}
              - disconnect: {at: 12s, mode: reset}
            expect:
              lost: 0
              duplicated: 0
            """
    }

    static func run(
        pair: String,
        bug: String,
        websocket: Bool,
        capture: Bool = false,
        clientTrusts: String = "ca.pem"
    )
        async throws -> (folder: String, home: String, status: Int32, scenario: String)
    {
        let home = try folder()
        let run = try await ThirdPartyPairRun.run("tls-pair", capture: capture, environment: ["CHAOS_HOME": home]) {
            scenario(listen: $0, upstream: $1, pair: pair, home: home, bug: bug, websocket: websocket, clientTrusts: clientTrusts)
        }
        return (run.folder, home, run.status, run.scenario)
    }

    @Test("an NDJSON pair over TLS passes with every count equal to its logs; keys.log holds both legs' secrets")
    func linesPair() async throws {
        let run = try await Self.run(pair: Self.lines, bug: "", websocket: false)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, _) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let keys = try String(contentsOfFile: "\(run.folder)/keys.log", encoding: .utf8)
        // TLS 1.3 both ways: every connection's two legs each log their traffic secrets.
        #expect(keys.components(separatedBy: "CLIENT_TRAFFIC_SECRET_0 ").count - 1 >= 4, "\(keys.prefix(400))")
        let mode = try FileManager.default.attributesOfItem(atPath: "\(run.folder)/keys.log")[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("an NDJSON pair over TLS that drops a message on resume fails, its losses equal to its logs")
    func linesPairDroppingOnResume() async throws {
        let run = try await Self.run(pair: Self.lines, bug: "--drop-on-resume 1", websocket: false)
        #expect(run.status == 1, "the run must fail (\(run.folder))")
        let (lost, _, _) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost > 0)
    }

    @Test(
        "a WebSocket pair over wss (ALPN http/1.1, deflate) passes with counts equal to its logs; tshark decrypts a tcpdump -i lo of it with keys.log; capture.pcap is marked decrypted and audits as the live run"
    )
    func websocketPair() async throws {
        let run = try await Self.run(pair: Self.websocket, bug: "", websocket: true, capture: true)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let events = json["protocol_events"] as? [String: Any] ?? [:]
        #expect((events["upgrades"] as? Int ?? 0) >= 4, "\(events)")
        let tcpdump = URL(fileURLWithPath: run.folder).deletingLastPathComponent().appendingPathComponent("lo.pcap").path
        let shark = try ChaosCLI.runBlocking(
            ["tshark", "-r", tcpdump] + TsharkDecodeAs.arguments(tcpdump, as: "tls") + [
                "-o", "tls.keylog_file:\(run.folder)/keys.log",
                "-Y", "websocket", "-T", "fields", "-e", "tcp.dstport",
            ],
            timeout: 60,
            program: "/usr/bin/env"
        )
        #expect(shark.status == 0, "\(shark.stderr)")
        let ports = Set(shark.stdout.split(separator: "\n"))
        // Frames decrypted on both legs: toward the proxy's port and toward the upstream's.
        #expect(ports.count >= 2, "tshark saw WebSocket frames on \(ports.sorted()) only")
        // chaos's own capture holds the decrypted WebSocket bytes, says so in the file, and audits as the live run did.
        let info = try ChaosCLI.runBlocking(["capinfos", "\(run.folder)/capture.pcap"], timeout: 60, program: "/usr/bin/env")
        #expect(info.stdout.contains("DECRYPTED: connections of the TLS proxies stream"), "\(info.stdout)")
        let comments = try ChaosCLI.runBlocking(
            [
                "tshark", "-r", "\(run.folder)/capture.pcap", "-Y", "frame.comment", "-T", "fields",
                "-e", "frame.comment",
            ],
            timeout: 60,
            program: "/usr/bin/env"
        )
        #expect(comments.stdout.contains("decrypted by chaos: proxy stream terminates TLS"), "\(comments.stdout.prefix(300))")
        let offline = try await ChaosCLI.run([
            "audit", "\(run.folder)/capture.pcap", "--protocol-from", run.scenario,
            "--out", "\(run.folder)-offline",
        ])
        #expect(offline.status == 0, "\(offline.stdout)\n\(offline.stderr)")
        let live = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        let audited = try DeliveredMeansAcknowledgedTests.streams("\(run.folder)-offline")
        for (key, stream) in live {
            #expect(
                audited[key]?["ok"] == stream["ok"] && audited[key]?["lost"] == stream["lost"],
                "\(key): offline \(audited[key] ?? [:]) live \(stream)"
            )
        }
        try? FileManager.default.removeItem(atPath: run.home)
    }

    @Test(
        "a client that does not trust chaos's CA: every refusal is a tls event with the hint, nothing is lost, and the run is inconclusive: nothing got through"
    )
    func untrustingClient() async throws {
        // The client trusts the upstream's own CA, not chaos's: it refuses chaos's leaf.
        let run = try await Self.run(pair: Self.lines, bug: "", websocket: false, clientTrusts: "upstream-ca.pem")
        #expect(run.status == 1, "no connection got through: inconclusive (\(run.folder))")
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        #expect(json["verdict"] as? String == "inconclusive", "\(json["verdict_reason"] ?? "")")
        #expect((json["verdict_reason"] as? String)?.hasPrefix("no connection went through") == true, "\(json["verdict_reason"] ?? "")")
        let events = json["protocol_events"] as? [String: Any] ?? [:]
        #expect((events["tls_failures"] as? Int ?? 0) >= 2, "\(events)")
        let anomalies = json["anomalies"] as? [[String: Any]] ?? []
        let tls = anomalies.filter { $0["class"] as? String == "tls" }
        #expect(!tls.isEmpty, "\(anomalies.prefix(3))")
        let detail = tls.first?["detail"] as? String ?? ""
        #expect(detail.contains("SNI localhost") && detail.contains("chaos ca --hint"), "\(detail)")
        let markdown = try String(contentsOfFile: "\(run.folder)/report.md", encoding: .utf8)
        #expect(markdown.contains("TLS handshakes failed"))
        try? FileManager.default.removeItem(atPath: run.home)
    }

    @Test("a grpcio pair over TLS (ALPN h2, keepalive, a GOAWAY) passes with every count equal to its logs")
    func grpcPair() async throws {
        let home = try Self.folder()
        let flags = "\(GRPCPairTests.producing) --tls-cert \(home)/server.pem --tls-ca \(home)/ca.pem --server-name localhost"
        let run = try await ThirdPartyPairRun.run("tls-grpc-pair", capture: false, environment: ["CHAOS_HOME": home]) { listen, upstream in
            GRPCPairTests.scenario(listen: listen, upstream: upstream, fields: .names, flags: flags)
                .replacingOccurrences(
                    of: "upstream: \"127.0.0.1:\(upstream)\"}",
                    with: "upstream: \"127.0.0.1:\(upstream)\", tls: {upstream: \(home)/upstream-ca.pem}}"
                )
        }
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let events = try GRPCPairTests.events(json)
        #expect((events["calls"] as? Int ?? 0) >= 2 && (events["pings"] as? Int ?? 0) > 0, "\(events)")
        // The proxy's GOAWAY, written into the TLS stream, reached the clients.
        #expect((events["goaways"] as? [String: Int])?["NO_ERROR"] ?? 0 >= 1, "\(events)")
        let scenario = try String(contentsOfFile: run.scenario, encoding: .utf8)
        #expect(scenario.contains("tls: {upstream:"), "the proxy speaks TLS")
        try? FileManager.default.removeItem(atPath: home)
    }

    /// A run of Tests/Fixtures/pairs/tls_end.py (a TLS server holding connections open, a client that writes how its
    /// connection ended to end.txt) through a `tls:` proxy; `client` replaces the client's command.
    static func endRun(
        tls: String,
        server: String = "",
        client: String? = nil,
        faults: String
    )
        async throws -> (folder: String, home: String, status: Int32)
    {
        let home = try folder()
        let script = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/tls_end.py").path
        // A fault must find the client connected, however slowly Python starts; a run without faults waits for nothing
        // (its client may never get through: an upstream that refuses it, a command that only probes).
        let ready = faults.contains("disconnect") ? "ready: connected" : ""
        let run = try await ThirdPartyPairRun.run("tls-end", capture: false, environment: ["CHAOS_HOME": home]) { listen, upstream in
            """
            name: tls-end
            duration: 4s
            proxies:
              - name: api
                listen: "127.0.0.1:\(listen)"
                upstream: "127.0.0.1:\(upstream)"
                tls: {upstream: \(home)/upstream-ca.pem\(tls.isEmpty ? "" : ", " + tls.replacingOccurrences(of: "HOME", with: home))}
            pair:
              server:
                run: python3 \(script) server --listen 127.0.0.1:{upstream.port} --tls-cert \(home)/server.pem \(server.replacingOccurrences(of: "HOME", with: home))
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 1s
              client:
                run: \(client?.replacingOccurrences(of: "HOME", with: home) ?? "python3 \(script) client --connect 127.0.0.1:{listen.port} --tls-ca \(home)/ca.pem --log {run_dir}/end.txt")
                \(ready)
            faults:
            \(faults)
            """
        }
        return (run.folder, home, run.status)
    }

    static func end(_ folder: String) throws -> String {
        try String(contentsOfFile: "\(folder)/end.txt", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(
        "disconnect mode close ends a TLS connection with close_notify then FIN; mode truncate with a FIN alone; mode reset with a RST alone",
        arguments: [("close", "clean"), ("truncate", "truncated"), ("reset", "reset")]
    )
    func truncate(mode: String, seen: String) async throws {
        let run = try await Self.endRun(tls: "", faults: "  - disconnect: {at: 2s, mode: \(mode)}")
        #expect(run.status == 0, "\(run.folder)")
        #expect(try Self.end(run.folder) == seen)
        try? FileManager.default.removeItem(atPath: run.home)
    }

    /// Seen beside a CPU hog in the shipped wss scenario (s77h3, and 3 of 46 runs of it beside a build): a client
    /// whose heartbeat gave up in a partition closed its socket; the messages the partition had held reached that
    /// socket once the path was back, its kernel answered with a RST, and the audit reported "the client ended the
    /// connection with a TLS error: uncleanShutdown". NIO closes a reset socket with no error event, and its TLS handler
    /// then calls the end unclean: a reset, which the relay passes on, not a TLS failure of the peer's.
    @Test(
        "a TLS peer that resets its TCP connection (no close_notify, no FIN) is a reset passed on, not a tls anomaly",
        arguments: ["client", "server"]
    )
    func peerResetIsNotATLSFailure(side: String) async throws {
        let script = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/tls_end.py").path
        let client = "python3 \(script) client --connect 127.0.0.1:{listen.port} --tls-ca HOME/ca.pem --log {run_dir}/end.txt --reset"
        let run = try await Self.endRun(
            tls: "",
            server: side == "server" ? "--reset" : "",
            client: side == "client" ? client : nil,
            faults: "  []"
        )
        #expect(try Self.end(run.folder) == (side == "client" ? "reset sent" : "reset"), "\(run.folder)")
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let connections = json["connections"] as? [String: Any] ?? [:]
        #expect(connections["opened"] as? Int == 1, "the connection was relayed: \(connections)")
        let tls = (json["anomalies"] as? [[String: Any]] ?? []).filter { $0["class"] as? String == "tls" }
        #expect(tls.isEmpty, "\(tls) (\(run.folder))")
        #expect(run.status == 0, "\(run.folder)")
        try? FileManager.default.removeItem(atPath: run.home)
        if tls.isEmpty { try? FileManager.default.removeItem(atPath: run.folder) }
    }

    @Test("an upstream that requires a client certificate (mTLS): reached with client_cert; without it a tls event names the upstream")
    func mutualTLS() async throws {
        let with = try await Self.endRun(
            tls: "client_cert: {cert: HOME/client.pem, key: HOME/client.pem}",
            server: "--client-ca HOME/upstream-ca.pem",
            faults: "  - disconnect: {at: 2s, mode: close}"
        )
        #expect(with.status == 0 && (try? Self.end(with.folder)) == "clean", "\(with.folder)")
        let without = try await Self.endRun(tls: "", server: "--client-ca HOME/upstream-ca.pem", faults: "  []")
        // TLS 1.3: the upstream refuses after the proxy's handshake completed, with an alert on the live connection.
        let anomalies = try DeliveredMeansAcknowledgedTests.reportJSON(without.folder)["anomalies"] as? [[String: Any]] ?? []
        let detail = anomalies.first { $0["class"] as? String == "tls" }?["detail"] as? String ?? ""
        #expect(detail.contains("upstream 127.0.0.1:"), "\(anomalies.prefix(2))")
        for run in [with, without] { try? FileManager.default.removeItem(atPath: run.home) }
    }

    @Test(
        "openssl s_client asking for a name gets the leaf for that name, issued by chaos's CA, and verifies it; the leaf also carries the verified upstream certificate's names"
    )
    func opensslSeesTheLeaf() async throws {
        let command =
            "sh -c 'openssl s_client -connect 127.0.0.1:{listen.port} -servername api.example.test -alpn h2 "
            + "-CAfile HOME/ca.pem < /dev/null 2>&1 | tee {run_dir}/s_client.txt | openssl x509 -noout -ext subjectAltName "
            + "> {run_dir}/san.txt 2>&1; echo done > {run_dir}/end.txt; exec sleep 30'"
        let run = try await Self.endRun(tls: "", client: command, faults: "  []")
        let output = try String(contentsOfFile: "\(run.folder)/s_client.txt", encoding: .utf8)
        #expect(output.contains("CN = api.example.test") || output.contains("CN=api.example.test"), "\(output.prefix(600))")
        #expect(output.contains("O = chaos") || output.contains("O=chaos"), "issued by chaos's CA")
        #expect(output.contains("Verify return code: 0 (ok)"), "\(output.suffix(400))")
        // The upstream's certificate (trustme) names localhost and 127.0.0.1; chaos verified it with its CA.
        let names = try String(contentsOfFile: "\(run.folder)/san.txt", encoding: .utf8)
        #expect(names.contains("DNS:api.example.test, DNS:localhost, IP Address:127.0.0.1"), "\(names)")
        try? FileManager.default.removeItem(atPath: run.home)
    }

    @Test(
        "handshake faults through the control API, seen by Python's ssl: fail is a handshake_failure alert, stall holds the handshake until lifted, a live connection echoes through both; tls via POST /proxies"
    )
    func handshakeFaults() async throws {
        let driver = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/tls_handshake_fault.py").path
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tls-handshake-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await ChaosCLI.run(
            ["python3", driver, ChaosCLI.executable, folder],
            timeout: 120,
            program: "/usr/bin/env"
        )
        let output = result.stdout + result.stderr
        #expect(result.status == 0, "\(output)")
        #expect(output.contains("mode fail: a new client's handshake: alert: SSLV3_ALERT_HANDSHAKE_FAILURE"), "\(output)")
        #expect(output.contains("stall lifted: the held client's handshake completes and echoes"), "\(output)")
        #expect(output.hasSuffix("PASS\n") || output.contains("\nPASS\n"), "\(output)")
    }
}
