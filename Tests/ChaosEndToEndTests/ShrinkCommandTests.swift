import Foundation
import Testing

/// `chaos shrink`: a failed run of the reference pair's naive client (no resume: it loses for sure what a reset
/// throws away after a partition held it, and rarely anything else) shrinks to that partition and that reset among
/// its five faults, as repro/ and a repro.yaml that fails again (its bad input: ``ShrinkInputTests``).
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
        // The reset, and at most one fault that holds bytes beside it: the partition it falls in (what the partition
        // held, the reset throws away), or the stall (s81t1: the reset and the stall failed both final runs, each alone
        // passed its trials); the reset alone (what was in flight at that instant) fails rarely, and a lucky candidate
        // may keep only it. Never the latency or the slice, which lose nothing.
        let kept = reproducer["occurrences"] as? [Int] ?? []
        #expect(kept == [2, 3] || kept == [3, 4] || kept == [3], "the reset, with the partition or the stall: \(reproducer)")
        #expect(reproducer["runs"] as? Int == 2, "\(reproducer)")
        if kept.count == 2 { #expect((reproducer["failures"] as? Int ?? 0) >= 1, "\(reproducer)") }
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
        #expect(!yaml.contains("latency:") && !yaml.contains("slice:"), "\(yaml)")
        #expect(yaml.contains("stall:") == kept.contains(4) && yaml.contains("partition:") == kept.contains(2), "\(yaml)")
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
}
