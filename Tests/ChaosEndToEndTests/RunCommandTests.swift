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
        // lost seqs are exactly the holes in the consumer's log: the server's log upstream, the client's downstream.
        var holes = 0
        for stream in report.streams {
            let expected = truth.holes(stream.key)
            holes += expected.count
            #expect(stream.lost == Int64(expected.count), "\(stream.key): audit lost \(stream.lost), log holes \(expected.count)")
            #expect(stream.ok == Int64(truth.distinct(stream.key).count), "\(stream.key): audit ok vs seqs processed")
            #expect(report.lostSeqs(stream.key) == Set(expected), "\(stream.key): lost ranges vs log holes")
        }
        #expect(report.totals.lost == Int64(holes))
        run.remove()
    }

    @Test("the resilient pair passes and the audit's per-stream counts equal the pair's own logs exactly (epoll relay, then NIO only)",
          arguments: [[], ["--no-epoll-relay"]])
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
        #expect(report.pairExits == ["server": 0, "client-1": 0, "client-2": 0, "client-3": 0])
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
            #expect(abs(replayed.atS - original.atS) <= 0.0005 && abs(replayed.forS - original.forS) <= 0.0005,
                    "\(replayed) vs \(original)")
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

    @Test("kill -TERM in the middle of a run stops the pair and leaves a valid report")
    func sigtermLeavesAValidReport() async throws {
        let run = try await RunFolderUnderTest.run([Self.resilient, "--duration", "60s"], signal: (after: 6, number: SIGTERM))
        let took = run.result.seconds
        #expect([0, 1].contains(run.result.status), "exit \(run.result.status): \(run.result.stderr)")
        #expect(run.result.stdout.contains("stopped by signal"))
        #expect(took < 20, "it stopped promptly (\(took) s): \(run.result.stdout)")
        let report = try run.report()
        #expect(report.schema == "chaos.report/1")
        // Signalled about 6 s after launch (start-up of the debug build under load takes part of that): well before 60 s.
        #expect(report.elapsedS > 1 && report.elapsedS < 20, "elapsed \(report.elapsedS)")
        #expect(report.extra?["interrupted"] != nil)
        #expect(report.faults.allSatisfy { $0.atS <= report.elapsedS })
        report.checkConsistentCounts()
        // Stopped cleanly: every pair process got SIGTERM, exited 0 and is gone.
        #expect(report.pairExits == ["server": 0, "client-1": 0, "client-2": 0, "client-3": 0])
        for pid in run.pairPIDs { #expect(kill(pid, 0) == -1 && errno == ESRCH, "pair process \(pid) still runs") }
        #expect(run.pairPIDs.count == 4)
        // And an interrupted run still agrees with the pair's logs.
        let truth = try GroundTruthLog(folder: run.folder)
        for stream in report.streams {
            #expect(stream.ok == Int64(truth.distinct(stream.key).count), "\(stream.key)")
            #expect(stream.lost == Int64(truth.holes(stream.key).count), "\(stream.key)")
        }
        for name in ["report.md", "junit.xml", "report.html"] {
            #expect(FileManager.default.fileExists(atPath: run.folder.appendingPathComponent(name).path), "\(name)")
        }
        run.remove()
    }

    @Test("a pair command that is missing or exits at once is a clear error, exit 2, nothing left running", arguments: [
        ("pair.server.run=no-such-chaos-server-command --port {upstream.port}",
         "pair server exited with status 127 before it was ready (command not found)", "no-such-chaos-server-command: not found"),
        ("pair.server.run=sh -c 'exit 3' {upstream.port}", "pair server exited with status 3", "before it was ready"),
        // Any of the three clients may be the first one seen dead.
        ("pair.client.run=chaos demo client --connect nowhere --stream x{index}", "exited at once with status 2",
         ".err: chaos: error: expected HOST:PORT, got 'nowhere'"),
    ])
    func brokenPairIsExitTwo(setting: String, fragment: String, detail: String) async throws {
        let run = try await RunFolderUnderTest.run([Self.resilient, "--set", setting], timeout: 30)
        #expect(run.result.status == 2, "exit \(run.result.status): \(run.result.stderr)")
        #expect(run.result.stderr.contains(fragment), "stderr: \(run.result.stderr)")
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

extension ReportJSON {
    /// The invariants every report keeps, finished or not.
    func checkConsistentCounts(sourceLocation: SourceLocation = #_sourceLocation) {
        var sum = Counts()
        for stream in streams {
            let counts = stream.counts
            #expect(counts.allNonNegative, "\(stream.key): \(counts)", sourceLocation: sourceLocation)
            #expect(counts.ok <= counts.delivered, "\(stream.key)", sourceLocation: sourceLocation)
            if let highest = stream.highestSeq {
                // ok + lost covers every seq from 1 to the highest seen (delivered, or sent and never delivered).
                #expect(counts.ok <= highest && counts.ok + counts.lost >= highest, "\(stream.key)",
                        sourceLocation: sourceLocation)
            }
            let ratio = counts.ok + counts.lost == 0 ? 1 : Double(counts.ok) / Double(counts.ok + counts.lost)
            #expect(abs(counts.deliveryRatio - ratio) < 1e-9, "\(stream.key)", sourceLocation: sourceLocation)
            sum.add(counts)
        }
        #expect(totals.allNonNegative, "\(totals)", sourceLocation: sourceLocation)
        #expect(sum.sent == totals.sent && sum.delivered == totals.delivered && sum.ok == totals.ok
                && sum.lost == totals.lost && sum.recovered == totals.recovered && sum.duplicated == totals.duplicated
                && sum.redelivered == totals.redelivered && sum.reordered == totals.reordered && sum.gaps == totals.gaps,
                "totals \(totals) are the sum of the streams \(sum)", sourceLocation: sourceLocation)
        #expect(totals.ok > 0, sourceLocation: sourceLocation)
    }
}

// MARK: - Support

/// One `chaos run` (or `chaos replay`) of a test: its own free ports, its own run folder, its output.
struct RunFolderUnderTest {
    let folder: URL
    let result: ChaosCLI.Result
    let listenPort: Int
    let upstreamPort: Int

    /// `chaos run ARGUMENTS --out FOLDER --set proxies.stream.listen=… --set proxies.stream.upstream=…`.
    static func run(_ arguments: [String], timeout: Double = 90,
                    signal: (after: Double, number: Int32)? = nil) async throws -> RunFolderUnderTest {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let folder = newFolder()
        let result = try await ChaosCLI.run(
            ["run"] + arguments + ["--out", folder.path, "--set", "proxies.stream.listen=127.0.0.1:\(listen)",
                                   "--set", "proxies.stream.upstream=127.0.0.1:\(upstream)"],
            timeout: timeout, signal: signal)
        return RunFolderUnderTest(folder: folder, result: result, listenPort: listen, upstreamPort: upstream)
    }

    /// `chaos replay EARLIER --out FOLDER` (the earlier run's ports, which it no longer uses).
    static func run(replaying earlier: RunFolderUnderTest, timeout: Double = 90) async throws -> RunFolderUnderTest {
        let folder = newFolder()
        let result = try await ChaosCLI.run(["replay", earlier.folder.path, "--out", folder.path], timeout: timeout)
        return RunFolderUnderTest(folder: folder, result: result, listenPort: earlier.listenPort,
                                  upstreamPort: earlier.upstreamPort)
    }

    private static func newFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("chaos-e2e-\(UUID().uuidString)")
    }

    /// `report.json`, decoded as a tool reading the documented schema would.
    func report() throws -> ReportJSON {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(ReportJSON.self, from: file("report.json"))
    }

    /// A file of the run folder.
    func file(_ name: String) throws -> Data { try Data(contentsOf: folder.appendingPathComponent(name)) }

    /// The faults the run printed as applied (`00:00:01.234  latency add=… -> 3 connection(s)`), without the time
    /// (which is when it really happened) or the connection count.
    var appliedFaults: [String] {
        result.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.count > 14, line.dropFirst(12).hasPrefix("  "), line.prefix(12).allSatisfy({ $0.isNumber || $0 == ":" || $0 == "." }),
                  let arrow = line.range(of: " -> ") else { return nil }
            return String(line[line.index(line.startIndex, offsetBy: 14)..<arrow.lowerBound])
        }
    }

    /// The process ids the run printed for its pair (`started client-1 (pid 123): …`).
    var pairPIDs: [Int32] {
        result.stdout.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("started "), let open = line.range(of: "(pid "),
                  let close = line[open.upperBound...].firstIndex(of: ")") else { return nil }
            return Int32(line[open.upperBound..<close])
        }
    }

    /// Deletes the run folder (called once a test has checked it, so a failed test leaves it for a look).
    func remove() { try? FileManager.default.removeItem(at: folder) }
}

/// The fields of `report.json` (schema `chaos.report/1`, PRODUCT §5) that these tests read.
struct ReportJSON: Decodable {
    struct Counts: Decodable, Equatable, CustomStringConvertible {
        var sent: Int64 = 0, delivered: Int64 = 0, ok: Int64 = 0, lost: Int64 = 0, recovered: Int64 = 0
        var duplicated: Int64 = 0, redelivered: Int64 = 0, reordered: Int64 = 0, gaps: Int64 = 0, unacked: Int64 = 0
        var deliveryRatio: Double = 1

        var allNonNegative: Bool {
            [sent, delivered, ok, lost, recovered, duplicated, redelivered, reordered, gaps, unacked].allSatisfy { $0 >= 0 }
                && (0...1).contains(deliveryRatio)
        }

        mutating func add(_ other: Counts) {
            sent += other.sent; delivered += other.delivered; ok += other.ok; lost += other.lost
            recovered += other.recovered; duplicated += other.duplicated; redelivered += other.redelivered
            reordered += other.reordered; gaps += other.gaps; unacked += other.unacked
        }

        var description: String { "ok \(ok) lost \(lost) sent \(sent) delivered \(delivered) redelivered \(redelivered)" }
    }

    struct Stream: Decodable {
        var stream: String
        var direction: String
        var highestSeq: Int64?
        var ok: Int64
        var lost: Int64
        var counts: Counts

        enum CodingKeys: String, CodingKey { case stream, direction, highestSeq, ok, lost }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            stream = try container.decode(String.self, forKey: .stream)
            direction = try container.decode(String.self, forKey: .direction)
            highestSeq = try container.decodeIfPresent(Int64.self, forKey: .highestSeq)
            ok = try container.decode(Int64.self, forKey: .ok)
            lost = try container.decode(Int64.self, forKey: .lost)
            counts = try Counts(from: decoder)
        }

        var key: GroundTruthLog.Key { GroundTruthLog.Key(stream: stream, direction: direction) }
    }

    /// A fault as the timeline decided it (what must be equal across runs with one seed).
    struct Fault: Decodable, Equatable {
        var kind: String
        var atS: Double
        var forS: Double
        var detail: [String: String]
    }

    struct Anomaly: Decodable {
        var `class`: String
        var stream: String
        var direction: String
        var fromSeq: Int64?
        var toSeq: Int64?
    }

    struct Expectation: Decodable {
        var name: String
        var ok: Bool
    }

    struct Connections: Decodable {
        var opened: Int64
        var cutByFault: Int64
        var refused: Int64
    }

    var schema: String
    var scenario: String
    var seed: UInt64
    var complete: Bool
    var verdict: String
    var replay: String
    var elapsedS: Double
    var faults: [Fault]
    var totals: Counts
    var streams: [Stream]
    var anomalies: [Anomaly]
    var expectations: [Expectation]
    var connections: Connections
    var pairExits: [String: Int32]?
    var extra: [String: String]?

    /// Every seq the report lists as lost on `key` (from its `lost` anomalies).
    func lostSeqs(_ key: GroundTruthLog.Key) -> Set<Int> {
        var seqs = Set<Int>()
        for anomaly in anomalies where anomaly.class == "lost" && anomaly.stream == key.stream && anomaly.direction == key.direction {
            guard let from = anomaly.fromSeq, let to = anomaly.toSeq, from <= to else { continue }
            seqs.formUnion(Int(from)...Int(to))
        }
        return seqs
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
enum TCPPort {
    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

/// The live processes of this machine whose command line mentions a string (from /proc).
enum PairProcesses {
    static func alive(mentioning text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let command = String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            return command.contains(text) ? pid : nil
        }
    }
}
