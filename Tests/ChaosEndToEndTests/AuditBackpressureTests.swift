import Foundation
import Testing

/// The live audit runs on a thread of its own behind a bounded queue: when it cannot keep up (here a test hook
/// slows it down), the full queue holds the relay back instead of growing, the report says for how long
/// (`audit_backpressure_s`), and every message is still counted.
@Suite("Audit backpressure", .timeLimit(.minutes(5)))
struct AuditBackpressureTests {
    static func scenario(listen: Int, upstream: Int) -> String {
        """
        name: backpressure
        duration: 6s
        seed: 5
        proxies:
          - {name: stream, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 200 --log {run_dir}/server.jsonl
            ready: tcp 127.0.0.1:{upstream.port}
          client:
            run: chaos demo client --connect 127.0.0.1:{listen.port} --stream b{index} --rate 200 --log {run_dir}/client-{index}.jsonl --state {run_dir}/client-{index}.state
            count: 2
        protocol:
          framing: lines
          seq: seq
          stream: stream
          ack: ack
          ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
        expect:
          lost: 0
          duplicated: 0
        """
    }

    static func run(environment: [String: String]) async throws -> [String: Any] {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let file = try ChaosCLI.scenarioFile(Self.scenario(listen: listen, upstream: upstream))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("backpressure-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        let result = try await ChaosCLI.run(["run", file, "--out", folder], timeout: 90, environment: env)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let data = try Data(contentsOf: URL(fileURLWithPath: folder).appendingPathComponent("report.json"))
        var json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        json["markdown"] = try String(contentsOfFile: "\(folder)/report.md", encoding: .utf8)
        return json
    }

    @Test("a slowed audit holds the relay back within its queue's bound; the report says how long; nothing is miscounted")
    func slowedAudit() async throws {
        let capacity = 32_768
        // 1.5 ms an event: the audit takes at most ~670 events a second, a fraction of what the pair makes even when a
        // loaded machine slows it (at 400 µs, a pair starved beside a CPU hog made so few that the audit kept up).
        let json = try await Self.run(environment: ["CHAOS_TEST_AUDIT_SLOWDOWN_US": "1500", "CHAOS_AUDIT_QUEUE_BYTES": "\(capacity)"])
        // The relay waited (how long depends on the machine: 0.21 s at 400 µs an event beside a CPU hog, where a quiet
        // machine waits seconds), and only ever on a full queue.
        let held = try #require((json["audit_backpressure_s"] as? NSNumber)?.doubleValue)
        #expect(held > 0, "held \(held) s")
        let extra = try #require(json["extra"] as? [String: String])
        let peak = try #require(extra["audit.queue_peak_bytes"].flatMap { Int($0) })
        // A producer waits when the bytes waiting and its event's would pass the capacity, so the queue held more than
        // half of it then (the bytes waiting, or the event appended once they were taken), and never more than the
        // capacity or one event over it (a read's 64 KiB and its overhead). Not "at least the capacity": run m3 waited
        // with 32,752 of 32,768 bytes queued, 16 short of it, for an event of more.
        #expect(peak > capacity / 2 && peak <= capacity + 65_536 + 64, "peak \(peak)")
        let totals = try #require(json["totals"] as? [String: Any])
        #expect((totals["ok"] as? NSNumber)?.intValue ?? 0 > 100)
        #expect((totals["lost"] as? NSNumber)?.intValue == 0 && (totals["duplicated"] as? NSNumber)?.intValue == 0)
        #expect((json["markdown"] as? String)?.contains("The audit could not keep up: the relay waited") == true)
    }

    @Test("an audit that keeps up never holds the relay: audit_backpressure_s is 0 and the report says nothing of it")
    func auditKeepsUp() async throws {
        let json = try await Self.run(environment: [:])
        #expect((json["audit_backpressure_s"] as? NSNumber)?.doubleValue == 0)
        #expect((json["markdown"] as? String)?.contains("could not keep up") == false)
    }
}
