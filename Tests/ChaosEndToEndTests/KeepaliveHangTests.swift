import Foundation
import Testing

/// A real bug from a public tracker, shown by the kernel dead path (issue: a dead path acknowledges nothing): Python
/// `websockets` 14.1 (#1527, fixed in 14.2), a client whose keepalive ping times out while unsent data is queued,
/// closes its transport gracefully, which waits to flush into the dead path: the connection hangs in CLOSING and the
/// app never reconnects. The client (Tests/Fixtures/pairs/ws_keepalive_client.py, written as an app writes it with
/// the library's `async for ws in connect()`) uploads 2.4 MB/s, goes quiet for 4 s behind a NAT that forgets a
/// connection idle for 3 s, and uploads again into the dead mapping. `make deps` installs both releases (a `pip install
/// --target` each, in ~/.cache/chaos-peers); without them, or without root and nft for the kernel path, the tests say so
/// and are skipped.
@Suite("websockets 14.1's keepalive hang (#1527) shows on a dead path", .timeLimit(.minutes(3)))
struct KeepaliveHangTests {
    static let server = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/resumable_ws_pair.py").path
    static let client = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/ws_keepalive_client.py").path

    /// Where `make deps` puts websockets `version` (a `pip install --target`).
    static func library(_ version: String) -> String {
        FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/chaos-peers/websockets-\(version)").path
    }

    static func installed(_ version: String) -> Bool {
        FileManager.default.fileExists(atPath: "\(library(version))/websockets/__init__.py")
    }

    /// The client produces from its first connection: 1.5 s, then 4 s quiet (the NAT forgets it after 3 s), then
    /// again until 14 s; its keepalive pings every 7 s and fails a ping 3 s late, with 1 s for the closing handshake.
    /// It writes 2.4 MB/s (48 KB messages) and lets its writes queue (a 16 MiB `write_limit`: past it, as past the
    /// library's default of 32 KiB, send() and the keepalive's own ping wait for the buffer to drain, which a dead path
    /// never lets them do, in every release). From the dead mapping to the failed ping it writes for 4.5 s: more than
    /// the socket's send buffer takes (4 MiB at most here) at any pace over 1 MB/s, and less than that plus the
    /// library's 16 MiB at any pace under 4.5 MB/s, so data is queued, under the mark, when it closes.
    static func scenario(listen: Int, upstream: Int, version: String) -> String {
        """
        name: websockets-keepalive-hang
        duration: 19s
        seed: 14
        proxies:
          - {name: app, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(server) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl --send-for 0 --timeout 60
            ready: tcp 127.0.0.1:{upstream.port}
            stop_grace: 1s
          client:
            run: python3 \(client) --connect 127.0.0.1:{listen.port} --stream c1 --log {run_dir}/client.jsonl --websockets \(library(version)) --size 48000 --rate 50 --write-limit 16777216 --ping-interval 7 --ping-timeout 3 --quiet-at 1.5 --quiet-for 4 --send-for 14
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
          - nat: {at: 0s, for: 19s, idle_timeout: 3s}
        expect:
          lost: 0
          duplicated: 0
        """
    }

    /// What one run showed: chaos's verdict and report, the server's log of what it read, the client's connections.
    struct Outcome {
        var folder: String
        var status: Int32
        var report: [String: Any]
        /// The audit's counts of the upload (stream c1 upstream).
        var upload: [String: Int64]
        /// Distinct seqs the server read.
        var read: Int
        /// The client's connections, and how many ended with an error it saw.
        var connections: Int
        var closes: Int
        /// The last seq the client had sent when it went quiet (its log's `quiet` event), 0 if it never did.
        var sentBeforeQuiet: Int

        /// The report's `dead_path` figures of the NAT fault (what each end's TCP met on the dead mappings).
        var deadPath: [String: Any] {
            let faults = report["faults"] as? [[String: Any]] ?? []
            return faults.first { $0["kind"] as? String == "nat" }?["dead_path"] as? [String: Any] ?? [:]
        }

        /// One side's figures of ``deadPath``.
        func deadPath(_ side: String) -> [String: Int] { deadPath[side] as? [String: Int] ?? [:] }
    }

    static func run(version: String, deadPath: String) async throws -> Outcome {
        let run = try await ThirdPartyPairRun.run("ws-keepalive-\(version)", capture: false, environment: ["CHAOS_DEAD_PATH": deadPath]) {
            scenario(listen: $0, upstream: $1, version: version)
        }
        let report = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let upload = try DeliveredMeansAcknowledgedTests.streams(run.folder)["c1/upstream"] ?? [:]
        let logs = try DeliveredMeansAcknowledgedTests.ConsumerLog.read(run.folder)
        let events = try String(contentsOfFile: "\(run.folder)/client.jsonl", encoding: .utf8).split(separator: "\n")
            .compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let outcome = Outcome(
            folder: run.folder,
            status: run.status,
            report: report,
            upload: upload,
            read: logs["c1/upstream"]?.distinct.count ?? 0,
            connections: events.filter { $0["event"] as? String == "connected" }.count,
            closes: events.filter { $0["event"] as? String == "closed" }.count,
            sentBeforeQuiet: events.first { $0["event"] as? String == "quiet" }?["last_seq"] as? Int ?? 0
        )
        print("dead path figures of the NAT fault: \(outcome.deadPath)")
        print(
            "websockets \(version), dead path \(deadPath == "proxy" ? "held in the proxy" : deadPath): \(outcome.upload), read \(outcome.read) (\(outcome.sentBeforeQuiet) sent before the quiet), connections \(outcome.connections) (\(run.folder))"
        )
        // Every message the server read is one the audit counts ok, and the other way round.
        #expect(upload["ok"] == Int64(outcome.read), "ok \(upload["ok"] ?? -1) vs \(outcome.read) read (\(run.folder))")
        // What the client sent before its quiet crossed a live path that then stayed up for 3 s: the server read all
        // of it. (How many that is depends on the client's pace on a busy machine, so the bound is its own log's.)
        #expect(outcome.sentBeforeQuiet > 0, "the client logged when it went quiet (\(run.folder))")
        #expect(
            outcome.read >= outcome.sentBeforeQuiet,
            "the upload was audited: \(outcome.read) read, \(outcome.sentBeforeQuiet) sent before the quiet (\(run.folder))"
        )
        return outcome
    }

    @Test(
        "on the kernel dead path websockets 14.1 hangs: its one connection never closes, the upload never resumes, and the run fails with what was stuck in the dead path",
        .enabled(if: DeadPathTests.kernelPath, "needs root and nft (Debian's nftables): the kernel dead path"),
        .enabled(if: installed("14.1"), "needs websockets 14.1 in ~/.cache/chaos-peers (make deps)")
    )
    func oldReleaseHangs() async throws {
        let outcome = try await Self.run(version: "14.1", deadPath: "kernel")
        #expect(outcome.status == 1, "the run must fail (\(outcome.folder))")
        #expect(outcome.connections == 1 && outcome.closes == 0, "the client hung on its first connection (\(outcome.folder))")
        #expect((outcome.upload["lost"] ?? 0) > 0, "what it wrote into the dead path never arrived: \(outcome.upload)")
        let reason = outcome.report["verdict_reason"] as? String ?? ""
        #expect(reason.contains("1 stream never resumed after a fault"), "the report says the stream never resumed: \(reason)")
        // What its TCP met: it sent into the dead mapping and saw nothing of it acknowledged.
        let client = outcome.deadPath("client")
        #expect(outcome.deadPath["in_kernel"] as? Bool == true, "\(outcome.deadPath)")
        #expect((client["sent_bytes"] ?? 0) > 0 && client["acknowledged_to_them_bytes"] == 0, "\(outcome.deadPath)")
    }

    @Test(
        "on the kernel dead path websockets 14.2 aborts the dead connection, reconnects and resumes: every message once",
        .enabled(if: DeadPathTests.kernelPath, "needs root and nft (Debian's nftables): the kernel dead path"),
        .enabled(if: installed("14.2"), "needs websockets 14.2 in ~/.cache/chaos-peers (make deps)")
    )
    func fixedReleaseReconnects() async throws {
        let outcome = try await Self.run(version: "14.2", deadPath: "kernel")
        #expect(outcome.status == 0, "the run must pass (\(outcome.folder))")
        #expect(outcome.connections >= 2 && outcome.closes >= 1, "the client reconnected (\(outcome.folder))")
        // It uploaded on after the dead mapping (how much depends on its pace on a busy machine; with nothing lost, all of it).
        #expect(
            outcome.read > outcome.sentBeforeQuiet,
            "it uploaded on after the dead mapping: \(outcome.read) read, \(outcome.sentBeforeQuiet) before the quiet (\(outcome.folder))"
        )
        #expect(outcome.upload["lost"] == 0 && outcome.upload["duplicated"] == 0, "\(outcome.upload)")
        // What its TCP met: nothing acknowledged of what it sent into the dead mapping. Its abort's FIN waits behind
        // those bytes, as on a real network: the close that reaches the proxy first is the server's.
        let client = outcome.deadPath("client")
        #expect(outcome.deadPath["in_kernel"] as? Bool == true, "\(outcome.deadPath)")
        #expect((client["sent_bytes"] ?? 0) > 0 && client["acknowledged_to_them_bytes"] == 0, "\(outcome.deadPath)")
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: outcome.folder).deletingLastPathComponent().path)
    }
}
