import Foundation
import Testing

/// A real third-party SSE pair (an `aiohttp` + `aiohttp-sse` server, an `aiohttp` client resuming with
/// Last-Event-ID; Tests/Fixtures/pairs/sse_pair.py) through `chaos run` with disconnects and a partition: the
/// audit's counts equal what the clients logged, for a correct pair, a server that skips an event on resume (lost)
/// and a client that resumes from a stale id (redelivered).
@Suite("SSE pair: the audit equals the pair's own logs", .serialized, .timeLimit(.minutes(3)))
struct SSEPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/sse_pair.py").path

    /// The disconnects close (FIN both ways): the client reads every byte before the end, so its log is the truth.
    /// `seq`: where the audit reads the seq: `id` (the event's id field, as SSE resumes by it), `data.seq` (the data's
    /// key, by name) or `seq` (the data's key, as scenarios before the event's own fields said it).
    static func scenario(listen: Int, upstream: Int, bug: String, seq: String) -> String {
        """
        name: sse-pair
        duration: 11s
        seed: 5
        proxies:
          - {name: events, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --send-for 8 --interval 0.05 \(bug)
            ready: tcp 127.0.0.1:{upstream.port}
            stop_grace: 1s
          client:
            run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --stream c{index} --log {run_dir}/client-{index}.jsonl \(bug)
            count: 2
            ready: connected
            stop_grace: 1s
        protocol:
          framing: sse
          format: json
          stream: query:s
          seq: \(seq)
          ignore: {type: [HELLO]}
        faults:
          - disconnect: {at: 2s, mode: close}
          - partition: {at: 4s, for: 1s, direction: both}
          - disconnect: {at: 6s, mode: close}
        expect:
          lost: 0
          duplicated: 0
          redelivered: 0
        """
    }

    static func run(bug: String, seq: String) async throws -> (folder: String, scenario: String, status: Int32) {
        try await ThirdPartyPairRun.run("sse-pair", capture: false) { scenario(listen: $0, upstream: $1, bug: bug, seq: seq) }
    }

    @Test(
        "a correct pair with seq: id (the event's id field) passes, every count equal to its logs; the reconnects are resumes, the retry fields counted"
    )
    func correctPair() async throws {
        let run = try await Self.run(bug: "", seq: "id")
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true)
        #expect(lost == 0 && duplicated == 0)
        let events = try #require(json["protocol_events"] as? [String: Any])
        #expect((events["sse_streams"] as? Int ?? 0) >= 4, "a stream per client, then a resume after each disconnect: \(events)")
        #expect((events["sse_resumes"] as? Int ?? 0) >= 2 && (events["sse_retries"] as? Int ?? 0) >= 4, "\(events)")
    }

    @Test(
        "a buggy pair fails, and what it got wrong equals its logs: an event skipped on resume is lost, a stale resume redelivered",
        arguments: [("--skip-on-resume 1", "lost", "data.seq"), ("--stale-resume 3", "redelivered", "seq")]
    )
    func buggyPair(bug: String, wrong: String, seq: String) async throws {
        let run = try await Self.run(bug: bug, seq: seq)
        #expect(run.status == 1, "the run must fail (\(run.folder))")
        let (lost, _, json) = try ThirdPartyPairRun.compare(run.folder, oneWay: true)
        let redelivered = (json["streams"] as? [[String: Any]] ?? []).reduce(0) { $0 + ($1["redelivered"] as? Int ?? 0) }
        #expect((wrong == "lost" ? Int(lost) : redelivered) > 0, "\(wrong) must show the bug")
    }
}
