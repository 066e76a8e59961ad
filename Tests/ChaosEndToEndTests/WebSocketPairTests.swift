import Foundation
import Testing

/// A real third-party WebSocket peer (the Python `websockets` library, permessage-deflate on, fragmented messages
/// and messages over 64 KiB) through `chaos run` with a partition and disconnects: the audit's counts equal what
/// the pair's own consumers logged (Tests/Fixtures/pairs/resumable_ws_pair.py), for a correct pair, one that drops
/// a message on resume and one that sends a message twice on a connection; and `chaos audit` of the run's capture
/// gives the live counts.
@Suite("WebSocket pair: the audit equals the pair's own logs", .serialized, .timeLimit(.minutes(3)))
struct WebSocketPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/resumable_ws_pair.py").path

    /// The reset comes once the pair stopped producing (`--send-for 11`): a reset in mid-stream can discard a
    /// message the consumer's kernel had taken but the (slow, Python) consumer had not read yet, which the audit
    /// counts as delivered (docs/audit.md, "Delivered means acknowledged": the one limit), so the logs could not be the ground truth.
    static let faults = """
          - partition: {at: 2s, for: 4s, direction: both}
          - disconnect: {at: 8s, mode: close}
          - disconnect: {at: 12s, mode: reset}
        """

    /// The pair's scenario: `flags` for both ends (heartbeat, timeout, when to stop producing, `bug`), `faults` as
    /// scenario lines.
    static func scenario(
        listen: Int,
        upstream: Int,
        bug: String,
        name: String = "websocket-pair",
        duration: String = "16s",
        flags: String = "--send-for 11 --heartbeat 1 --timeout 2.5",
        faults: String = faults
    ) -> String {
        let common = "\(flags) \(bug)"
        return """
            name: \(name)
            duration: \(duration)
            seed: 11
            proxies:
              - {name: stream, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
            pair:
              server:
                run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl \(common)
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 1s
              client:
                run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --stream c{index} --log {run_dir}/client-{index}.jsonl \(common)
                count: 2
                ready: connected
                stop_grace: 1s
            protocol:
              framing: websocket
              stream: header:x-stream
              seq: seq
              ack: ack
              ignore: {type: [HELLO, WELCOME, ACK]}
              downstream: {seq: n}
            faults:
            \(faults)
            expect:
              lost: 0
              duplicated: 0
            """
    }

    /// Runs the scenario with `bug` flags for the pair; returns the run folder and the exit status.
    /// With `capture`, the run also writes capture.pcap and a `tcpdump -i lo` of both legs goes to `lo.pcap` beside it.
    static func run(bug: String, capture: Bool = false) async throws -> (folder: String, scenario: String, status: Int32) {
        try await ThirdPartyPairRun.run("ws-pair", capture: capture) { scenario(listen: $0, upstream: $1, bug: bug) }
    }

    /// Checks every count against the logs; returns the audit's totals of lost and duplicated.
    static func compare(_ folder: String) throws -> (lost: Int64, duplicated: Int64, json: [String: Any]) {
        try ThirdPartyPairRun.compare(folder)
    }

    @Test(
        "a correct pair passes, every count equal to its logs, with deflate, fragments and 66 KB messages; its capture and a tcpdump -i lo of it audit the same"
    )
    func correctPair() async throws {
        let run = try await Self.run(bug: "", capture: true)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try Self.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let events = try #require(json["protocol_events"] as? [String: Any] ?? json["protocolEvents"] as? [String: Any])
        #expect((events["upgrades"] as? Int ?? 0) >= 4, "a connection per client, then reconnects: \(events)")
        #expect((events["pings"] as? Int ?? 0) > 0)
        // Our capture and a tcpdump -i lo of the same run give the live audit's counts.
        let tcpdump = URL(fileURLWithPath: run.folder).deletingLastPathComponent().appendingPathComponent("lo.pcap").path
        let live = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        var matched = run.status == 0
        for (name, pcap) in [("our capture", "\(run.folder)/capture.pcap"), ("tcpdump -i lo", tcpdump)] {
            let out = "\(run.folder)-\(name == "our capture" ? "ours" : "tcpdump")"
            let offline = try await ChaosCLI.run(["audit", pcap, "--protocol-from", run.scenario, "--out", out])
            #expect(offline.status == 0, "\(name): \(offline.stdout)\n\(offline.stderr)")
            let fromCapture = try DeliveredMeansAcknowledgedTests.streams(out)
            for (key, stream) in live {
                for count in ["delivered", "ok", "lost", "duplicated", "redelivered"] {
                    #expect(
                        fromCapture[key]?[count] == stream[count],
                        "\(name) \(key) \(count): \(fromCapture[key]?[count] ?? -1), live \(stream[count] ?? -1) (kept: \(run.folder))"
                    )
                    matched = matched && fromCapture[key]?[count] == stream[count]
                }
            }
            let offlineEvents = try DeliveredMeansAcknowledgedTests.reportJSON(out)["protocol_events"] as? [String: Any]
            #expect(offlineEvents?["close_codes"] as? [String: Int] == events["close_codes"] as? [String: Int], "\(name)")
        }
        // A run whose capture audits differently stays for diagnosis (its pcaps and both offline reports).
        if matched { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path) }
    }

    @Test(
        "a buggy pair fails, and what it got wrong equals its logs: a message dropped on resume is lost, one sent twice on a connection is duplicated",
        arguments: [("--drop-on-resume 1", "lost"), ("--dup-every 25", "duplicated")]
    )
    func buggyPair(bug: String, wrong: String) async throws {
        // Captured, so that a run whose counts differ from its logs can be traced on the wire (session 66's were).
        let run = try await Self.run(bug: bug, capture: true)
        #expect(run.status == 1, "the run must fail (\(run.folder))")
        let (lost, duplicated, _) = try Self.compare(run.folder)
        #expect((wrong == "lost" ? lost : duplicated) > 0, "\(wrong) must show the bug")
    }
}
