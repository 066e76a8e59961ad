import Foundation
import Testing

/// `chaos shrink`: a failed run of the reference pair's naive client (no resume: it loses for sure what a reset
/// throws away after a partition held it, and rarely anything else) shrinks to that partition and that reset among
/// its five faults, as repro/ and a repro.yaml that fails again; bad input is exit 2.
@Suite("chaos shrink", .serialized, .timeLimit(.minutes(5)))
struct ShrinkCommandTests {
    /// The demo pair, one client (naive or not), through a latency, a slice, a partition with a reset inside it and a
    /// stall, in 7 s.
    static func scenario(naive: Bool) -> String {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        return """
            name: shrink-me
            duration: 7s
            seed: 21
            proxies:
              - name: stream
                listen: 127.0.0.1:\(listen)
                upstream: 127.0.0.1:\(upstream)
            pair:
              server:
                run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 20 --log {run_dir}/server.jsonl
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 2s
              client:
                run: chaos demo client \(naive ? "--naive " : "")--connect 127.0.0.1:{listen.port} --stream c{index} --rate 20 --log {run_dir}/client-{index}.jsonl
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
              - latency: {at: 1s, for: 1s, add: 50ms}
              - slice: {at: 2500ms, for: 1s, size: 7}
              - partition: {at: 3500ms, for: 1s}
              - disconnect: {at: 3800ms, mode: reset}
              - stall: {at: 5s, for: 500ms}
            expect:
              lost: 0
            """
    }

    static func json(_ path: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    }

    @Test("the naive client's failed run shrinks to the partition and the reset in it; repro.yaml validates and fails again; replay --window")
    func shrinksToTheReset() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("shrink-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let file = "\(base)/shrink-me.yaml"
        try Self.scenario(naive: true).write(toFile: file, atomically: true, encoding: .utf8)
        let failed = try await ChaosCLI.run(["run", file, "--out", "\(base)/run"], timeout: 60)
        #expect(failed.status == 1, "the naive client loses what the reset cut: \(failed.stdout)\n\(failed.stderr)")
        let shrink = try await ChaosCLI.run(
            ["shrink", "\(base)/run", "--budget", "4m", "--final-runs", "2", "--warmup", "1s", "--settle", "2s"],
            timeout: 300
        )
        #expect(shrink.status == 0, "\(shrink.stdout)\n\(shrink.stderr)")
        let summary = try Self.json("\(base)/run/shrink/shrink.json")
        let reproducer = try #require(summary["reproducer"] as? [String: Any], "\(summary)")
        // The partition and the reset in it; the reset alone (what was in flight at that instant) fails rarely, and
        // a lucky candidate may keep only it.
        let kept = reproducer["occurrences"] as? [Int] ?? []
        #expect(kept == [2, 3] || kept == [3], "the partition and the reset: \(reproducer)")
        #expect(reproducer["runs"] as? Int == 2, "\(reproducer)")
        if kept == [2, 3] { #expect((reproducer["failures"] as? Int ?? 0) >= 1, "\(reproducer)") }
        let trials = summary["trials"] as? [[String: Any]] ?? []
        #expect(trials.contains { $0["stage"] as? String == "ddmin" && $0["reproduced"] as? Bool == false }, "ddmin dropped faults: \(trials)")
        #expect(
            (summary["headline"] as? String)?.contains("5 faults → ") == true
        )
        let markdown = try String(contentsOfFile: "\(base)/run/shrink/shrink.md", encoding: .utf8)
        #expect(markdown.contains("| 3 | disconnect | "), "\(markdown)")
        let repro = "\(base)/run/shrink/repro.yaml"
        let yaml = try String(contentsOfFile: repro, encoding: .utf8)
        #expect(yaml.contains(", mode: reset}  # occurrence #3 of the failed run"), "\(yaml)")
        #expect(!yaml.contains("latency:") && !yaml.contains("slice:") && !yaml.contains("stall:"), "\(yaml)")
        let validate = try await ChaosCLI.run(["validate", repro], timeout: 30)
        #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")
        if kept == [2, 3] {
            // The partition may be halved once (it still holds what the reset throws away at 1.3 s), not twice.
            #expect(
                yaml.contains("  - partition: {at: 1s, for: 1s, direction: both}")
                    || yaml.contains("  - partition: {at: 1s, for: 500ms, direction: both}"),
                "\(yaml)"
            )
            #expect(yaml.contains("  - disconnect: {at: 1.3s, mode: reset}  # occurrence #3 of the failed run"), "\(yaml)")
            let again = try await ChaosCLI.run(["run", repro, "--out", "\(base)/again"], timeout: 60)
            #expect(again.status == 1, "the reproducer fails again: \(again.stdout)")
        }
        // chaos replay --window: only the slice (clipped to the window) and the reset, after a 3 s warm-up.
        let windowed = try await ChaosCLI.run(["replay", "\(base)/run", "--window", "3s..4500ms", "--out", "\(base)/window"], timeout: 60)
        #expect(windowed.status == 1, "the reset still throws away what the partition held: \(windowed.stdout)")
        #expect(windowed.stdout.contains("window 3s..4.5s of the run: 3 fault(s) (#1, #2, #3), after a 3s warm-up"), "\(windowed.stdout)")
        let replayed = try Self.json("\(base)/window/timeline.json")["occurrences"] as? [[String: Any]] ?? []
        #expect(replayed.count == 3, "\(replayed)")
        // repro/ is the exact reproducer `chaos replay` runs: the same scenario as the failed run, the reset alone.
        let timeline = try Self.json("\(base)/run/shrink/repro/timeline.json")
        #expect((timeline["occurrences"] as? [[String: Any]])?.count == kept.count)
    }

    @Test("bad input is exit 2: a run that passed, a scenario without a pair, a folder without its timeline, a bad budget")
    func badInput() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("shrink-bad-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let file = "\(base)/pass.yaml"
        try Self.scenario(naive: false).write(toFile: file, atomically: true, encoding: .utf8)
        let passed = try await ChaosCLI.run(["run", file, "--out", "\(base)/run"], timeout: 60)
        #expect(passed.status == 0, "\(passed.stdout)\n\(passed.stderr)")
        let nothing = try await ChaosCLI.run(["shrink", "\(base)/run"], timeout: 30)
        #expect(nothing.status == 2 && nothing.stderr.contains("nothing to shrink: the run's verdict is pass"), "\(nothing.stderr)")
        // The same folder, made a failed run without a pair.
        var report = try Self.json("\(base)/run/report.json")
        report["verdict"] = "fail"
        try JSONSerialization.data(withJSONObject: report).write(to: URL(fileURLWithPath: "\(base)/run/report.json"))
        var scenario = try Self.json("\(base)/run/scenario.json")
        scenario.removeValue(forKey: "pair")
        try JSONSerialization.data(withJSONObject: scenario).write(to: URL(fileURLWithPath: "\(base)/run/scenario.json"))
        let unpaired = try await ChaosCLI.run(["shrink", "\(base)/run"], timeout: 30)
        #expect(unpaired.status == 2 && unpaired.stderr.contains("has no pair: section: add one"), "\(unpaired.stderr)")
        try FileManager.default.removeItem(atPath: "\(base)/run/timeline.json")
        let damaged = try await ChaosCLI.run(["shrink", "\(base)/run"], timeout: 30)
        #expect(damaged.status == 2 && damaged.stderr.contains("timeline.json is missing"), "\(damaged.stderr)")
        let budget = try await ChaosCLI.run(["shrink", "\(base)/run", "--budget", "soon"], timeout: 30)
        #expect(budget.status == 2 && budget.stderr.contains("--budget must be a duration like 20m or 90s, found 'soon'"), "\(budget.stderr)")
    }
}
