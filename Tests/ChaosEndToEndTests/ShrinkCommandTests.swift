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
        let (listen, upstream) = DemoPairScenario.ports()
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
        let failed = try await ChaosCLI.run(["run", file, "--capture", "--out", "\(base)/run"], timeout: 60)
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
        // chaos bundle: one .tar.gz with what replay and shrink need, the logs' tails, the capture's packets around the
        // failure (tshark reads them), a README with the commands.
        let bundled = try await ChaosCLI.run(["bundle", "\(base)/run", "--out", "\(base)/run.tar.gz"], timeout: 60)
        #expect(bundled.status == 0, "\(bundled.stdout)\n\(bundled.stderr)")
        let listing = try ChaosCLI.runBlocking(["tar", "-tzf", "\(base)/run.tar.gz"], timeout: 30, program: "/usr/bin/env")
        for name in ["scenario.json", "timeline.json", "report.json", "report.md", "README.md", "VERSION", "logs/server.jsonl", "capture-slice.pcap"]
        {
            #expect(listing.stdout.contains("run/\(name)"), "\(name) in the bundle: \(listing.stdout)")
        }
        #expect(!listing.stdout.contains("shrink/"), "the shrink's own candidates stay out: \(listing.stdout)")
        try FileManager.default.createDirectory(atPath: "\(base)/unpacked", withIntermediateDirectories: true)
        _ = try ChaosCLI.runBlocking(["tar", "-xzf", "\(base)/run.tar.gz", "-C", "\(base)/unpacked"], timeout: 30, program: "/usr/bin/env")
        let packets = try ChaosCLI.runBlocking(
            ["tshark", "-r", "\(base)/unpacked/run/capture-slice.pcap", "-Y", "tcp.len > 0", "-T", "fields", "-e", "frame.number"],
            timeout: 60,
            program: "/usr/bin/env"
        )
        #expect(packets.stdout.split(separator: "\n").count > 10, "tshark reads the slice's data packets: \(packets.stderr)")
        let readme = try String(contentsOfFile: "\(base)/unpacked/run/README.md", encoding: .utf8)
        #expect(readme.contains("chaos shrink run.tar.gz") && readme.contains("chaos replay run.tar.gz"), "\(readme)")
        // chaos replay of the bundle --window: only the slice (clipped to the window) and the reset, after a 3 s warm-up.
        let windowed = try await ChaosCLI.run(["replay", "\(base)/run.tar.gz", "--window", "3s..4500ms", "--out", "\(base)/window"], timeout: 60)
        #expect(windowed.status == 1, "the reset still throws away what the partition held: \(windowed.stdout)")
        #expect(windowed.stdout.contains("window 3s..4.5s of the run: 3 fault(s) (#1, #2, #3), after a 3s warm-up"), "\(windowed.stdout)")
        let replayed = try Self.json("\(base)/window/timeline.json")["occurrences"] as? [[String: Any]] ?? []
        #expect(replayed.count == 3, "\(replayed)")
        // repro/ is the exact reproducer `chaos replay` runs: the same scenario as the failed run, the reset alone.
        let timeline = try Self.json("\(base)/run/shrink/repro/timeline.json")
        #expect((timeline["occurrences"] as? [[String: Any]])?.count == kept.count)
    }

    @Test(
        "the demo server's planted takeover bug (chaos shrink's test subject): a client-only cut, which leaves the server's side open as the client comes back, loses downstream messages; a reset, which both sides see, does not"
    )
    func plantedTakeoverBug() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("planted-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        var verdicts: [String: Int32] = [:]
        for (name, fault) in [("cut", "disconnect: {at: 2s, mode: client-only, linger: 3s}"), ("reset", "disconnect: {at: 2s, mode: reset}")] {
            // The demo pair with the server's planted takeover bug, one client, through `fault` at 2 s, for 6 s.
            let scenario = DemoPairScenario.text(name: "planted", duration: "6s", serverFlags: "--rate 50 --takeover-bug 1", faults: [fault])
            try scenario.write(toFile: "\(base)/\(name).yaml", atomically: true, encoding: .utf8)
            let run = try await ChaosCLI.run(["run", "\(base)/\(name).yaml", "--out", "\(base)/\(name)"], timeout: 60)
            verdicts[name] = run.status
            let report = try Self.json("\(base)/\(name)/report.json")
            let totals = report["totals"] as? [String: Any] ?? [:]
            #expect((totals["ok"] as? Int ?? 0) > 100, "\(name): messages were audited: \(totals)")
            let serverLog = try String(contentsOfFile: "\(base)/\(name)/server.jsonl", encoding: .utf8)
            if name == "cut" {
                #expect(serverLog.contains("\"takeover-bug\""), "the bug fired on the takeover")
                let lost = totals["lost"] as? Int ?? 0
                let clientLog = try String(contentsOfFile: "\(base)/\(name)/client-1.jsonl", encoding: .utf8)
                #expect(lost > 0 && clientLog.contains("\"hole\""), "lost \(lost); the client's log shows the hole")
            } else {
                #expect(!serverLog.contains("\"takeover\""), "a reset is seen by the server first: no takeover")
            }
        }
        #expect(verdicts == ["cut": 1, "reset": 0], "\(verdicts)")
    }

    @Test(
        "bad input is exit 2: a run that passed, a scenario without a pair, a folder without its timeline, a bad budget; a failure that does not come back is exit 1"
    )
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
        // The same from its bundle; a damaged bundle and a folder that is no run are bad input too.
        let bundled = try await ChaosCLI.run(["bundle", "\(base)/run"], timeout: 30)
        #expect(bundled.status == 0 && FileManager.default.fileExists(atPath: "\(base)/run.tar.gz"), "\(bundled.stdout)\n\(bundled.stderr)")
        // What a command unpacks a bundle into goes when it ends, whether it ran or refused.
        let temporary = ["TMPDIR": "\(base)/tmp"]
        try FileManager.default.createDirectory(atPath: "\(base)/tmp", withIntermediateDirectories: true)
        let fromBundle = try await ChaosCLI.run(["shrink", "\(base)/run.tar.gz"], timeout: 30, environment: temporary)
        #expect(fromBundle.status == 2 && fromBundle.stderr.contains("nothing to shrink: the run's verdict is pass"), "\(fromBundle.stderr)")
        try Data("not a tarball".utf8).write(to: URL(fileURLWithPath: "\(base)/damaged.tar.gz"))
        let damagedBundle = try await ChaosCLI.run(["shrink", "\(base)/damaged.tar.gz"], timeout: 30, environment: temporary)
        #expect(
            damagedBundle.status == 2 && damagedBundle.stderr.contains("\(base)/damaged.tar.gz is not a readable chaos bundle"),
            "\(damagedBundle.stderr)"
        )
        let replayDamaged = try await ChaosCLI.run(["replay", "\(base)/damaged.tar.gz"], timeout: 30, environment: temporary)
        #expect(replayDamaged.status == 2, "\(replayDamaged.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: "\(base)/tmp").filter { $0.hasPrefix("chaos-unbundled-") }
        #expect(left.isEmpty, "unpacked bundles left behind: \(left)")
        let notARun = try await ChaosCLI.run(["bundle", base], timeout: 30)
        #expect(notARun.status == 2 && notARun.stderr.contains("is not a finished run folder: scenario.json is missing"), "\(notARun.stderr)")
        let badOut = try await ChaosCLI.run(["bundle", "\(base)/run", "--out", "\(base)/run.zip"], timeout: 30)
        #expect(badOut.status == 2 && badOut.stderr.contains("--out must name a .tar.gz"), "\(badOut.stderr)")
        // The same folder, made a failed run without a pair.
        var report = try Self.json("\(base)/run/report.json")
        report["verdict"] = "fail"
        try JSONSerialization.data(withJSONObject: report).write(to: URL(fileURLWithPath: "\(base)/run/report.json"))
        // The resuming pair loses nothing again: the failure does not come back within the budget (exit 1, no
        // reproducer, the runs it took said).
        let gone = try await ChaosCLI.run(
            ["shrink", "\(base)/run", "--budget", "20s", "--final-runs", "1", "--warmup", "1s", "--settle", "1s"],
            timeout: 120
        )
        #expect(gone.status == 1, "\(gone.stdout)\n\(gone.stderr)")
        let goneSummary = try Self.json("\(base)/run/shrink/shrink.json")
        let goneRuns = (goneSummary["trials"] as? [[String: Any]] ?? []).reduce(0) { $0 + (($1["runs"] as? [Any])?.count ?? 0) }
        #expect(goneRuns >= 1 && goneSummary["reproducer"] == nil, "\(goneSummary)")
        #expect(gone.stdout.contains("did not reproduce in \(goneRuns) run"), "\(gone.stdout)")
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
