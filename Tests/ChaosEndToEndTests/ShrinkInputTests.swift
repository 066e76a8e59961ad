import Foundation
import Testing

/// `chaos shrink`'s test subject (the demo server's planted takeover bug) and its bad input: a suite of their own, beside
/// ``ShrinkCommandTests``' long shrink, so that the two share the test lanes' wall clock rather than follow it.
@Suite("chaos shrink: its test subject and bad input", .serialized, .timeLimit(.minutes(5)))
struct ShrinkInputTests {
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
            let report = try ShrinkCommandTests.json("\(base)/\(name)/report.json")
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
        try ShrinkCommandTests.scenario(naive: false).write(toFile: file, atomically: true, encoding: .utf8)
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
        var report = try ShrinkCommandTests.json("\(base)/run/report.json")
        report["verdict"] = "fail"
        try JSONSerialization.data(withJSONObject: report).write(to: URL(fileURLWithPath: "\(base)/run/report.json"))
        // The resuming pair loses nothing again: the failure does not come back within the budget (exit 1, no
        // reproducer, the runs it took said).
        let gone = try await ChaosCLI.run(
            ["shrink", "\(base)/run", "--budget", "20s", "--final-runs", "1", "--warmup", "1s", "--settle", "1s"],
            timeout: 120
        )
        #expect(gone.status == 1, "\(gone.stdout)\n\(gone.stderr)")
        let goneSummary = try ShrinkCommandTests.json("\(base)/run/shrink/shrink.json")
        let goneRuns = (goneSummary["trials"] as? [[String: Any]] ?? []).reduce(0) { $0 + (($1["runs"] as? [Any])?.count ?? 0) }
        #expect(goneRuns >= 1 && goneSummary["reproducer"] == nil, "\(goneSummary)")
        #expect(gone.stdout.contains("did not reproduce in \(goneRuns) run"), "\(gone.stdout)")
        var scenario = try ShrinkCommandTests.json("\(base)/run/scenario.json")
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
