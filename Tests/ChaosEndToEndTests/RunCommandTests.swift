import Foundation
import Testing

/// `chaos run` as a user runs it, with the built-in pair, its verdicts checked against what the pair's own
/// logs say it processed. Every run gets its own ports (`--set proxies.stream.…`) and its own run folder.
@Suite("chaos run end to end, checked against the demo pair's own logs")
struct RunCommandTests {
    static let resilient = "Tests/Fixtures/scenarios/resilient-short.yaml"
    static let seeded = "Tests/Fixtures/scenarios/seeded-timeline.yaml"

    @Test("the naive pair fails with lost > 0, exactly the seqs its own logs show it never processed")
    func naivePairLosesWhatItsLogsShow() async throws {
        let run = try await RunFolderUnderTest.run(["Scenarios/naive.yaml", "--duration", "15s"])
        #expect(run.result.status == 1, "exit \(run.result.status): \(run.result.stderr)")
        let report = try run.report()
        let truth = try GroundTruthLog(folder: run.folder)
        #expect(report.verdict == "fail")
        #expect(report.expectations.first { $0.name == "lost" }?.ok == false)
        #expect(report.totals.lost > 0)
        #expect(report.streams.count == 4, "n1, n2 each way: \(report.streams.map(\.key))")
        #expect(truth.keys == report.streams.map(\.key).sorted())

        // Lost means never written by the proxy to the consumer; the naive consumer processes every message it
        // reads (no deduplication) and, since it drains on stop, reads every message written to it. So the audit's
        // lost seqs are the holes in the consumer's log (the server's log upstream, the client's downstream), but for
        // the unconfirmed ones: taken by the consumer's TCP just before a reset, past its last ack, which it may have
        // read (the naive client often does) or not.
        for stream in report.streams {
            let expected = truth.holes(stream.key)
            let processed = truth.distinct(stream.key).count
            #expect(
                stream.accountsFor(holes: expected.count, processed: processed),
                "\(stream.key): audit lost \(stream.lost), ok \(stream.ok), unconfirmed \(stream.unconfirmed); log holes \(expected.count), processed \(processed)"
            )
            #expect(report.lostSeqs(stream.key).isSubset(of: Set(expected)), "\(stream.key): lost ranges vs log holes")
        }
        run.remove()
    }

    @Test(
        "the resilient pair passes and the audit's per-stream counts equal the pair's own logs exactly (epoll relay, then NIO only)",
        arguments: [[], ["--no-epoll-relay"]]
    )
    func resilientPairMatchesItsLogs(relay: [String]) async throws {
        let run = try await RunFolderUnderTest.run([Self.resilient] + relay)
        #expect(run.result.status == 0, "exit \(run.result.status): \(run.result.stdout)\n\(run.result.stderr)")
        let report = try run.report()
        let truth = try GroundTruthLog(folder: run.folder)
        #expect(report.verdict == "pass")
        #expect(report.complete)
        #expect(report.totals.lost == 0)
        #expect(report.connections.cutByFault >= 5, "the disconnects hit the pair: \(report.connections)")
        #expect(report.faults.map(\.kind).filter { $0 == "disconnect" }.count == 5)
        let cleanExits: [String: Int32] = ["server": 0, "client-1": 0, "client-2": 0, "client-3": 0]
        #expect(report.pairExits == cleanExits)
        #expect(report.streams.map(\.key).sorted() == truth.keys)
        #expect(report.streams.count == 6)
        for stream in report.streams {
            let processed = truth.distinct(stream.key)
            #expect(stream.ok == Int64(processed.count), "\(stream.key): audit ok \(stream.ok), processed \(processed.count)")
            #expect(stream.lost == 0, "\(stream.key)")
            #expect(truth.holes(stream.key).isEmpty, "\(stream.key): the pair's log has holes")
            #expect(stream.highestSeq == Int64(truth.highest(stream.key)), "\(stream.key): highest seq")
            #expect(processed.count > 100, "\(stream.key): the stream carried traffic")
        }
        run.remove()
    }

    @Test("the same seed twice gives the same fault timeline, another seed another, and chaos replay reproduces it")
    func sameSeedSameTimelineAndReplay() async throws {
        async let first = RunFolderUnderTest.run([Self.seeded, "--seed", "1234"])
        async let second = RunFolderUnderTest.run([Self.seeded, "--seed", "1234"])
        async let other = RunFolderUnderTest.run([Self.seeded, "--seed", "1235"])
        let (a, b, c) = try await (first, second, other)
        for run in [a, b, c] { #expect(run.result.status == 0, "exit \(run.result.status): \(run.result.stderr)") }
        let replay = try await RunFolderUnderTest.run(replaying: a)
        #expect(replay.result.status == 0, "exit \(replay.result.status): \(replay.result.stderr)")

        let (reportA, reportB, reportC, reportD) = try (a.report(), b.report(), c.report(), replay.report())
        let faults = reportA.faults
        #expect(faults.count >= 8, "\(faults)")
        #expect(Set(faults.map(\.kind)) == ["disconnect", "latency", "bandwidth", "slice", "handoff"])
        #expect(reportB.faults == faults)
        // Replay re-applies the timeline saved in timeline.json, whose durations ChaosDuration encodes with its
        // 3-decimal `description` (1.641341627s is saved as "1.641s"): so a replay runs each fault up to 0.5 ms
        // off the original. Same kinds, parameters and order, times equal to within that rounding:
        #expect(reportD.faults.map(\.kind) == faults.map(\.kind))
        #expect(reportD.faults.map(\.detail) == faults.map(\.detail))
        for (replayed, original) in zip(reportD.faults, faults) {
            #expect(
                abs(replayed.atS - original.atS) <= 0.0005 && abs(replayed.forS - original.forS) <= 0.0005,
                "\(replayed) vs \(original)"
            )
        }
        #expect(reportD.faults == faults, "replay reproduces the times exactly")
        #expect(reportC.faults != faults)
        #expect(reportD.seed == 1234 && reportA.seed == 1234)
        #expect(reportA.replay.contains("--seed 1234"))
        #expect(reportD.replay == "chaos replay \(a.folder.path)")
        // The timeline the runner saved (and replay re-applied) is the same, and so is what it printed as applied.
        #expect(try a.file("timeline.json") == b.file("timeline.json"))
        #expect(try a.file("timeline.json") == replay.file("timeline.json"))
        #expect(a.appliedFaults.count == faults.count)
        #expect(a.appliedFaults == b.appliedFaults)
        #expect(a.appliedFaults == replay.appliedFaults)
        for run in [a, b, c, replay] { run.remove() }
    }

    @Test("SIGTERM or SIGINT in the middle of a run stops the pair and leaves a valid report", arguments: [SIGTERM, SIGINT])
    func signalLeavesAValidReport(signal: Int32) async throws {
        // About 6 s after launch, and not before the pair's server and every client processed a message (a loaded
        // machine may start them later: a client signalled as it started exited 143, and two fresh-clone runs signalled
        // once the clients' logs existed had no message through yet, ok 0).
        let run = try await RunFolderUnderTest.run(
            [Self.resilient, "--duration", "60s"],
            signal: (after: 6, number: signal),
            signalOnceLogged: ["server.jsonl", "client-1.jsonl", "client-2.jsonl", "client-3.jsonl"]
        )
        let took = run.result.seconds
        #expect([0, 1].contains(run.result.status), "exit \(run.result.status): \(run.result.stderr)")
        #expect(run.result.stdout.contains("stopped by signal"))
        // Short of the 60 s it was set to run (a run that ran to its end takes that and its drain): the planned
        // duration is the bound, not a wall time a loaded machine may exceed (a debug build was seen to take 21 s).
        #expect(took < 60, "it stopped before its end (\(took) s): \(run.result.stdout)")
        let report = try run.report()
        #expect(report.schema == "chaos.report/1")
        // Signalled about 6 s after launch (start-up of the debug build under load takes part of that): before its 60 s.
        #expect(report.elapsedS > 1 && report.elapsedS < 60, "elapsed \(report.elapsedS)")
        #expect(report.extra?["interrupted"] != nil)
        #expect(report.faults.allSatisfy { $0.atS <= report.elapsedS })
        report.checkConsistentCounts()
        // Stopped cleanly: every pair process got SIGTERM, exited 0 and is gone.
        #expect(report.pairExits == ["server": 0, "client-1": 0, "client-2": 0, "client-3": 0])
        for pid in run.pairPIDs { #expect(kill(pid, 0) == -1 && errno == ESRCH, "pair process \(pid) still runs") }
        #expect(run.pairPIDs.count == 4)
        // And an interrupted run still agrees with the pair's logs, but for the seqs the stop left unconfirmed: a client
        // that exits with acks unread is reset, the proxy passes the reset on to the server's leg, and what the
        // server's TCP took before it may or may not have been read (one fresh-clone run: ok 28, the server's log 29).
        // And but for the lost seqs past the end of the consumer's log: a fault cut them in flight and the stop came
        // before the consumer resumed (fresh-clone run s75q1: a client started late under load had its connection
        // reset by the disconnect at 7.4 s as it read its 6th message, and was stopped while it waited to reconnect:
        // ok 6, lost 2, its log 6 processed and no hole). The stop excuses nothing, as a capture of the run could not
        // tell it (SequenceCheckerTests), so they count lost; what the log cannot show is past its end.
        let truth = try GroundTruthLog(folder: run.folder)
        var accounted = true
        for stream in report.streams {
            let holes = truth.holes(stream.key).count
            let processed = truth.distinct(stream.key).count
            var judged = stream
            judged.lost -= Int64(report.lostSeqs(stream.key).count { $0 > truth.highest(stream.key) })
            guard !judged.accountsFor(holes: holes, processed: processed) else { continue }
            accounted = false
            Issue.record(
                "\(stream.key): ok \(stream.ok), lost \(stream.lost), unconfirmed \(stream.unconfirmed); log \(processed) processed, \(holes) holes (run folder kept: \(run.folder.path))"
            )
        }
        for name in ["report.md", "junit.xml", "report.html"] {
            #expect(FileManager.default.fileExists(atPath: run.folder.appendingPathComponent(name).path), "\(name)")
        }
        // A run whose counts the logs do not explain is kept for a look (its pair's logs, the report's anomalies).
        if accounted { run.remove() }
    }

    @Test(
        "a pair command that is missing or exits at once is a clear error, exit 2, nothing left running",
        arguments: [
            (
                "pair.server.run=no-such-chaos-server-command --port {upstream.port}",
                "pair server exited with status 127 before it was ready (command not found)", "no-such-chaos-server-command: not found"
            ),
            ("pair.server.run=sh -c 'exit 3' {upstream.port}", "pair server exited with status 3", "before it was ready"),
            // Any of the three clients may be the first one seen dead: at once, or (a cold start of the debug binary on
            // a loaded machine outlasting the start-up window) before it connected.
            (
                "pair.client.run=chaos demo client --connect nowhere --stream x{index}",
                "exited with status 2 before it connected|exited at once with status 2",
                ".err: chaos: error: expected HOST:PORT, got 'nowhere'"
            ),
        ]
    )
    func brokenPairIsExitTwo(setting: String, fragment: String, detail: String) async throws {
        // Its clients say `ready: connected`, as the shipped scenarios' do: one that dies before it connects stops the
        // start however long it took to die (without it, a client slower to die than the start-up window ended a
        // fresh-clone run's pair early, with no message on stderr).
        let text = try String(contentsOf: ChaosCLI.packageRoot.appendingPathComponent(Self.resilient), encoding: .utf8)
            .replacingOccurrences(of: "    count: 3\n", with: "    count: 3\n    ready: connected\n")
        let scenario = FileManager.default.temporaryDirectory.appendingPathComponent("resilient-connected-\(UUID().uuidString).yaml")
        try text.write(to: scenario, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: scenario) }
        let run = try await RunFolderUnderTest.run([scenario.path, "--set", setting], timeout: 30)
        #expect(run.result.status == 2, "exit \(run.result.status): \(run.result.stderr)")
        #expect(fragment.split(separator: "|").contains { run.result.stderr.contains($0) }, "stderr: \(run.result.stderr)")
        #expect(run.result.stderr.contains(detail), "stderr: \(run.result.stderr)")
        // Nothing keeps running: the proxy's port is free again and no pair process of this run is alive.
        #expect(!TCPPort.accepts(run.listenPort), "the proxy still listens on \(run.listenPort)")
        // The run folder is in every pair command line of this run, and in no other test's (ports may be reused).
        #expect(PairProcesses.alive(mentioning: run.folder.path).isEmpty)
        // The run folder says why it could not be judged.
        let report = try run.report()
        #expect(report.verdict == "error")
        #expect(report.complete)
        run.remove()
    }
}
