import Foundation
import Testing

/// A real third-party Socket.IO pair (a python-socketio server on aiohttp, a python-socketio AsyncClient that resumes
/// through its CONNECT auth; Scenarios/socketio/socketio_pair.py) through `chaos run` with disconnects and a
/// partition, over long polling then the upgrade and over WebSocket only: the audit's counts equal what the clients
/// logged, for a correct pair, a server that skips an event on resume (lost) and a client that resumes from a stale
/// offset (redelivered); and Engine.IO's own faults over long polling only.
@Suite("Socket.IO pair: the audit equals the pair's own logs", .serialized, .timeLimit(.minutes(4)))
struct SocketIOPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Scenarios/socketio/socketio_pair.py").path

    /// Disconnects, a FIN then a reset, and a partition between them.
    static let cuts = """
          - disconnect: {at: 2s, mode: close}
          - partition: {at: 4s, for: 1s, direction: both}
          - disconnect: {at: 7s, mode: reset}
        """

    static func scenario(listen: Int, upstream: Int, transports: String, bug: String, stream: String, faults: String = cuts) -> String {
        """
        name: socketio-pair
        duration: 12s
        seed: 5
        proxies:
          - {name: events, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --send-for 9 --interval 0.05 --clients 2 \(bug)
            ready: tcp 127.0.0.1:{upstream.port}
            stop_grace: 1s
          client:
            run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --stream c{index} --transports \(transports) --log {run_dir}/client-{index}.jsonl \(bug)
            count: 2
            ready: connected
            stop_grace: 1s
        protocol:
          framing: socketio
          format: json
          seq: 1.seq
          stream: \(stream)
        faults:
        \(faults)
        expect:
          lost: 0
          duplicated: 0
          redelivered: 0
        """
    }

    static func run(
        transports: String,
        bug: String = "",
        stream: String = "query:stream",
        faults: String = cuts
    ) async throws -> (folder: String, status: Int32) {
        let run = try await ThirdPartyPairRun.run("socketio-pair", capture: false) {
            scenario(listen: $0, upstream: $1, transports: transports, bug: bug, stream: stream, faults: faults)
        }
        return (run.folder, run.status)
    }

    @Test(
        "a correct pair passes over each transport, every count equal to its logs",
        arguments: [("both", "query:stream"), ("websocket", "auth:stream")]
    )
    func correctPair(transports: String, stream: String) async throws {
        let run = try await Self.run(transports: transports, stream: stream)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true)
        #expect(lost == 0 && duplicated == 0)
        let events = try #require(json["protocol_events"] as? [String: Any])
        #expect((events["sio_connects"] as? Int ?? 0) >= 4, "a CONNECT per client, then one after each cut: \(events)")
        if transports == "both" { #expect((events["eio_upgrades"] as? Int ?? 0) >= 2, "\(events)") }
        if transports == "both" { #expect((events["eio_polls"] as? Int ?? 0) >= 4, "the handshakes went over long polling: \(events)") }
    }

    @Test(
        "eio-session-unknown over long polling only: each client's poll gets the 400 a restarted server answers; the clients start new sessions and resume, each count equal to their logs"
    )
    func sessionUnknown() async throws {
        let run = try await Self.run(transports: "polling", faults: "      - eio-session-unknown: {at: 3s}")
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true)
        #expect(lost == 0 && duplicated == 0)
        let totals = try #require(json["totals"] as? [String: Any])
        #expect((totals["ok"] as? Int ?? 0) >= 100, "two clients, a tick every 50 ms for 9 s: \(totals)")
        // The fault's count is the polls it struck at its instant; a client between two polls then meets it on its next
        // (the fault lies in wait for a restarted server's sessions), which its 400 below counts (s77q2: 1 struck, 2
        // answered 400).
        try Self.expectReached("eio-session-unknown", json, atLeast: 1)
        let events = try #require(json["protocol_events"] as? [String: Any])
        let refusals = events["eio_refusals"] as? [String: Any] ?? [:]
        #expect((refusals["400"] as? Int ?? 0) >= 2, "the proxy's 400 reached both clients: \(events)")
        #expect((events["sio_connects"] as? Int ?? 0) >= 4, "a CONNECT per client, then a new session each: \(events)")
        #expect((events["eio_upgrades"] as? Int ?? 0) == 0, "polling only: \(events)")
    }

    @Test(
        "eio-poll-hang over long polling only: the hang reaches the clients' polls; what the audit counts lost is exactly the holes in their logs"
    )
    func pollHang() async throws {
        let run = try await Self.run(transports: "polling", faults: "      - eio-poll-hang: {at: 3s, hold: 2s}")
        // python-socketio keeps its Engine.IO session through the hang (it never reconnects, so no resume runs): an event
        // in the answer the hang swallowed is gone (seq 81 of one client, in a run here).
        // The run may fail; the audit must agree with the logs either way. The swallowed answer may hold a client's
        // last events (s56h2: the hang came late on a loaded machine, as the server sent its 180th and last): its log
        // then has no hole, and the audit's loss is past its last seq (the server sends 9 s at 20 a second: 180).
        let (_, duplicated, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true, producedThrough: 180)
        #expect(duplicated == 0)
        try Self.expectReached("eio-poll-hang", json)
        let totals = try #require(json["totals"] as? [String: Any])
        #expect((totals["ok"] as? Int ?? 0) >= 100, "\(totals)")
    }

    @Test(
        "eio-upgrade-hang over long polling then the upgrade: the clients' upgrades after a reset get no answer, and they go on over long polling; each count equal to their logs"
    )
    func upgradeHang() async throws {
        let faults = "      - eio-upgrade-hang: {at: 2s, for: 5s, hold: 2s}\n      - disconnect: {at: 3s, mode: reset}"
        let run = try await Self.run(transports: "both", faults: faults)
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true)
        #expect(run.status == 0 && lost == 0 && duplicated == 0, "the run must pass (\(run.folder))")
        try Self.expectReached("eio-upgrade-hang", json)
        let totals = try #require(json["totals"] as? [String: Any])
        #expect((totals["ok"] as? Int ?? 0) >= 100, "\(totals)")
        // python-engineio waits for the upgrade's answer inside connect() with no time limit: its polling session
        // expires meanwhile (no pong), so each caught upgrade costs the session, and the client starts a new one
        // (the server's 400 "Session ID unknown"), whose upgrade is caught again until the fault ends.
        let events = try #require(json["protocol_events"] as? [String: Any])
        #expect((events["eio_opens"] as? Int ?? 0) > (events["eio_upgrades"] as? Int ?? 0), "upgrades that never completed: \(events)")
    }

    /// The fault named `kind` reached at least `least` connections (the clients' polling connections).
    static func expectReached(_ kind: String, _ json: [String: Any], atLeast least: Int = 2) throws {
        let impacts = try #require(json["faults"] as? [[String: Any]])
        let reached = impacts.filter { $0["kind"] as? String == kind }.reduce(0) { $0 + ($1["connections"] as? Int ?? 0) }
        #expect(reached >= least, "\(kind) reached the clients' polling connections: \(impacts)")
    }

    @Test(
        "Scenarios/socketio.yaml as a user runs it (on free ports): polling, the upgrade, a FIN cut, a partition and two resets; it passes, each stream equal to its client's log"
    )
    func shippedScenario() async throws {
        let (folder, result) = try await ThirdPartyPairRun.shipped("socketio", proxy: "events")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(folder, oneWay: true)
        #expect(lost == 0 && duplicated == 0)
        let totals = try #require(json["totals"] as? [String: Any])
        #expect((totals["ok"] as? Int ?? 0) >= 300, "two clients, a tick every 50 ms for 17 s: \(totals)")
        let events = try #require(json["protocol_events"] as? [String: Any])
        #expect((events["sio_connects"] as? Int ?? 0) >= 6, "a CONNECT per client, then one after each of three cuts: \(events)")
        #expect((events["eio_upgrades"] as? Int ?? 0) >= 2 && (events["eio_polls"] as? Int ?? 0) >= 2, "\(events)")
        if result.status == 0 { try? FileManager.default.removeItem(atPath: folder) }
    }

    @Test(
        "a buggy pair fails, and what it got wrong equals its logs: an event skipped on resume is lost, a stale offset redelivered",
        arguments: [("--skip-on-resume 1", "lost"), ("--stale-resume 3", "redelivered")]
    )
    func buggyPair(bug: String, wrong: String) async throws {
        let run = try await Self.run(transports: "both", bug: bug)
        // The bug acts on a resume: the server's log shows the faults made the clients resume.
        let serverLog = (try? String(contentsOfFile: run.folder + "/server.out", encoding: .utf8)) ?? ""
        let resumes = serverLog.split(separator: "\n").filter { !$0.contains("\"offset\": 0,") && $0.contains("\"connect\"") }
        #expect(!resumes.isEmpty, "the faults made a client resume: \(serverLog)")
        #expect(run.status == 1, "the run must fail (\(run.folder)): \(resumes)")
        let (lost, _, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true)
        let redelivered = (json["streams"] as? [[String: Any]] ?? []).reduce(0) { $0 + ($1["redelivered"] as? Int ?? 0) }
        #expect((wrong == "lost" ? Int(lost) : redelivered) > 0, "\(wrong) must show the bug")
    }
}
