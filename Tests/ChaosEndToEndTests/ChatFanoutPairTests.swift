import Foundation
import Testing

/// A chat server's fan-out through chaos (`protocol.fanout`): Tests/Fixtures/pairs/chat_pair.py on PyPI `websockets`,
/// three members of one room that each send numbered messages and get every other member's, resuming after each cut
/// (the server keeps the room's history and replays what a returning member missed). What the server writes to each
/// member is that member's own copy of each sender's stream, named by the `user` of its WebSocket URL: the audit's
/// copies equal what each member's log says it was handed, and each sender's own stream what the server accepted.
@Suite("Chat fan-out: each member's copy of each sender's stream equals its log", .serialized, .timeLimit(.minutes(3)))
struct ChatFanoutPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/chat_pair.py").path

    static func scenario(listen: Int, upstream: Int, bug: String) -> String {
        """
        name: chat-fanout
        duration: 14s
        seed: 5
        proxies:
          - {name: chat, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl \(bug)
            ready: tcp 127.0.0.1:{upstream.port}
            stop_grace: 1s
          client:
            run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --user u{index} --log {run_dir}/client-{index}.jsonl --rate 10 --send-for 9
            count: 3
            ready: connected
            stop_grace: 1s
        protocol:
          framing: websocket
          format: json
          fanout: {sender: from, seq: n, receiver: query:user, resume: seen}
          ack: ack
          ignore: {type: [hello]}
        faults:
          - disconnect: {at: 2s, mode: reset}
          - partition: {at: 4s, for: 3s, direction: both}
          - disconnect: {at: 9s, mode: reset}
        expect:
          lost: 0
          duplicated: 0
        """
    }

    /// What the logs say, per "stream direction receiver" key: the server's accepted messages (upstream, per sender)
    /// and each member's handed-on copies (downstream, per sender and member).
    static func logged(_ folder: String) throws -> [String: Set<Int64>] {
        try MQTTPairTests.logged(folder, files: ["server"] + (1...3).map { "client-\($0)" })
    }

    /// Runs the pair with `bug`; checks every stream against the logs (``judged(_:status:)``).
    static func run(bug: String) async throws -> Judged {
        let run = try await ThirdPartyPairRun.run("chat-fanout", capture: false) { Self.scenario(listen: $0, upstream: $1, bug: bug) }
        return try judged(run.folder, status: run.status)
    }

    /// A run of three members that each send to the others, checked against the logs (each member's copies exactly;
    /// each sender's stream at least what the server accepted); the run's status, the report and each copy's holes.
    static func judged(_ folder: String, status: Int32) throws -> Judged {
        let run = (folder: folder, status: status)
        let logs = try Self.logged(run.folder)
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let streams = try MQTTPairTests.audited(json: json)
        // Three senders, each copied to the two other members.
        #expect(logs.keys.filter { $0.contains("upstream") }.count == 3, "\(logs.keys.sorted()) (\(run.folder))")
        #expect(logs.keys.filter { $0.contains("downstream") }.count == 6, "\(logs.keys.sorted()) (\(run.folder))")
        #expect(Set(streams.keys) == Set(logs.keys), "\(streams.keys.sorted()) vs \(logs.keys.sorted()) (\(run.folder))")
        var holes: [String: Int] = [:]
        for (key, seqs) in logs {
            let stream = try #require(streams[key], "\(key) (\(run.folder))")
            let ok = stream["ok"] as? Int ?? -1
            #expect(seqs.count >= 20, "\(key): \(seqs.count) logged")
            if key.contains("upstream") {
                #expect(ok >= seqs.count && stream["lost"] as? Int == 0, "\(key): \(stream) vs \(seqs.count) accepted (\(run.folder))")
                continue
            }
            // A member that read a copy and then reset its connection (its socket closed on its ping timeout with
            // later bytes unread) before its ACK went out: the audit cannot know it read it (unconfirmed, not ok).
            let unconfirmed = stream["unconfirmed"] as? Int ?? 0
            #expect(
                ok <= seqs.count && seqs.count <= ok + unconfirmed,
                "\(key): audit ok \(ok) (+\(unconfirmed) unconfirmed) vs \(seqs.count) in the member's log (\(run.folder))"
            )
            let sender = String(key.split(separator: " ")[0])
            let sent = logs["\(sender) upstream -"]?.max() ?? 0
            holes[key] = (1...max(sent, seqs.max() ?? 0)).filter { !seqs.contains($0) }.count
        }
        return (run.status, json, holes, run.folder)
    }

    typealias Judged = (status: Int32, json: [String: Any], holes: [String: Int], folder: String)

    /// A correct fan-out's run: it passed, no member's log has a hole, nothing lost or duplicated, no copy unattributed.
    static func expectPassed(_ run: Judged) throws {
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        #expect(run.holes.values.allSatisfy { $0 == 0 }, "\(run.holes)")
        let totals = try #require(run.json["totals"] as? [String: Any])
        #expect(totals["lost"] as? Int == 0 && totals["duplicated"] as? Int == 0, "\(totals)")
        let messages = run.json["messages"] as? [String: Any] ?? [:]
        #expect(messages["unattributed"] as? Int == 0, "every copy went to a named member: \(messages)")
    }

    /// A server that skips what it owes a returning member: the run failed, each copy's `lost` equals its log's holes.
    /// `everyCopy`: every copy has a hole (a server that skips whether or not the member was owed anything).
    static func expectSkipsLost(_ run: Judged, everyCopy: Bool = false) throws {
        #expect(run.status == 1, "the run must fail (\(run.folder))")
        let streams = try MQTTPairTests.audited(json: run.json)
        var lost = 0
        for (key, holes) in run.holes {
            #expect(streams[key]?["lost"] as? Int == holes, "\(key): lost \(streams[key]?["lost"] ?? "?") vs \(holes) holes (\(run.folder))")
            lost += holes
        }
        #expect(lost > 0, "the cuts made members resume and the server skip: \(run.holes)")
        if everyCopy { #expect(run.holes.values.allSatisfy { $0 > 0 }, "every copy has a hole: \(run.holes)") }
    }

    @Test("a chat server that replays what a returning member missed: every member got every message once, as its log says; the run passes")
    func resumingServerPasses() async throws {
        try Self.expectPassed(try await Self.run(bug: ""))
    }

    @Test(
        "a chat server that skips the first message of each sender it hands a returning member: its losses equal the holes in its log; the run fails"
    )
    func skippingServerFails() async throws {
        // Every member resumed after the reset at 2 s while every sender still sent (until 9 s): every copy has a hole.
        try Self.expectSkipsLost(try await Self.run(bug: "--drop-on-resume 1"), everyCopy: true)
    }
}
