import Foundation
import Testing

/// `chaos run --repeat N` / `--until-fail`: the same scenario and timeline with a fresh pair each time, a folder per
/// run and a summary with the failure rate's confidence interval.
@Suite("chaos run --repeat and --until-fail", .serialized)
struct RepeatRunTests {
    /// The demo pair for 2 s with a reset at 1 s; `naive`: the client that loses what the reset cut, sending 500
    /// messages a second (at 50 a reset rarely finds one in flight: a fresh-clone run passed 4 runs of 4).
    static func scenario(naive: Bool) -> String {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        return """
            name: repeated
            duration: 2s
            seed: 3
            proxies:
              - name: stream
                listen: 127.0.0.1:\(listen)
                upstream: 127.0.0.1:\(upstream)
            pair:
              server:
                run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 50 --log {run_dir}/server.jsonl
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 2s
              client:
                run: chaos demo client \(naive ? "--naive " : "")--connect 127.0.0.1:{listen.port} --stream c{index} --rate \(naive ? 500 : 50) --log {run_dir}/client-{index}.jsonl
                count: 1
                ready: connected
                stop_grace: 2s
            protocol:
              framing: lines
              format: json
              seq: seq
              stream: stream
              ack: ack
              ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
            faults:
              - disconnect: {at: 1s, mode: reset}
            expect:
              lost: 0
            """
    }

    static func summary(_ folder: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: folder).appendingPathComponent("summary.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("--repeat 3 of a passing scenario: three run folders, each with its report, and a summary of 0 of 3 failed; exit 0")
    func repeatPassing() async throws {
        let file = try ChaosCLI.scenarioFile(Self.scenario(naive: false))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("repeat-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await ChaosCLI.run(["run", file, "--repeat", "3", "--out", folder], timeout: 120)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("repeat: 0 of 3 runs failed (0%, 95% CI 0%–56%)"), "\(result.stdout)")
        let summary = try Self.summary(folder)
        let runs = summary["runs"] as? [[String: Any]] ?? []
        #expect(runs.count == 3 && runs.allSatisfy { $0["verdict"] as? String == "pass" }, "\(runs)")
        for index in 1...3 {
            let report = "\(folder)/run-00\(index)/report.json"
            #expect(FileManager.default.fileExists(atPath: report), "\(report)")
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
            #expect(((json?["totals"] as? [String: Any])?["ok"] as? Int ?? 0) > 0, "run \(index) audited messages")
        }
        #expect(FileManager.default.fileExists(atPath: "\(folder)/summary.md"))
    }

    @Test("--until-fail with a client that loses what a reset cut: stops at the first failed run, exit 1, the summary names it")
    func untilFail() async throws {
        let file = try ChaosCLI.scenarioFile(Self.scenario(naive: true))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("until-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await ChaosCLI.run(["run", file, "--until-fail", "--repeat", "4", "--out", folder], timeout: 120)
        #expect(result.status == 1, "\(result.stdout)\n\(result.stderr)")
        let summary = try Self.summary(folder)
        let runs = summary["runs"] as? [[String: Any]] ?? []
        #expect(runs.last?["verdict"] as? String == "fail", "\(runs)")
        #expect(runs.dropLast().allSatisfy { $0["verdict"] as? String == "pass" })
        #expect(summary["failed"] as? Int == 1 && summary["planned"] as? Int == 4 && summary["until_fail"] as? Bool == true)
        #expect((summary["failure_rate_ci95"] as? [Double])?.count == 2)
    }

    @Test("--repeat 0 and --repeat with --agent are bad input (exit 2)")
    func badRepeat() async throws {
        let file = try ChaosCLI.scenarioFile(Self.scenario(naive: false))
        let zero = try await ChaosCLI.run(["run", file, "--repeat", "0"], timeout: 30)
        #expect(zero.status == 2 && zero.stderr.contains("--repeat must be a count from 1 to 100000, found 0"), "\(zero.stderr)")
        let agent = try await ChaosCLI.run(["run", file, "--repeat", "2", "--agent", "a1"], timeout: 30)
        #expect(agent.status == 2 && agent.stderr.contains("not with --agent or --hold"), "\(agent.stderr)")
    }
}
