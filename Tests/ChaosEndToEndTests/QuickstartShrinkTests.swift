import Foundation
import Testing

/// Issue 35's acceptance on the quickstart: with the reference pair's naive client (it reconnects at once and never
/// resumes), the run fails; each failure in report.json `failures[]` names the faults before it, and the capture shows
/// the reset named there ending the very connection that carried the lost message; `chaos shrink` reduces the run to
/// that reset alone.
@Suite("The quickstart with the naive client: failures[] against the capture, and chaos shrink", .serialized, .timeLimit(.minutes(6)))
struct QuickstartShrinkTests {
    /// `tshark -r capture -Y filter -T fields -e …`: one array of fields per packet.
    static func tshark(_ capture: String, _ filter: String, _ fields: [String]) throws -> [[String]] {
        let run = try ChaosCLI.runBlocking(
            ["tshark", "-r", capture, "-Y", filter, "-T", "fields"] + fields.flatMap { ["-e", $0] },
            timeout: 120,
            program: "/usr/bin/env"
        )
        try #require(run.status == 0, "tshark: \(run.stderr)")
        return run.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    /// Where the run's clock is on the capture's: the offset that puts the most RSTs within 50 ms of a reset fault's
    /// moment. A reset fault cuts every connection at once, both legs of each; a peer's own reset (a naive client's on a
    /// loaded machine, before any fault) is one connection's, so the first RST of the capture is not always a fault's.
    static func clockOrigin(rsts: [Double], resets: [Double]) -> Double? {
        let candidates = rsts.flatMap { rst in resets.map { rst - $0 } }
        func aligned(_ origin: Double) -> Int {
            rsts.filter { rst in resets.contains { abs(rst - origin - $0) < 0.05 } }.count
        }
        return candidates.max { aligned($0) < aligned($1) || (aligned($0) == aligned($1) && $0 > $1) }
    }

    @Test(
        "Scenarios/quickstart.yaml, 20 s, the naive client: every loss names the reset that cut its connection (the capture has that RST on it at that moment); chaos shrink reduces it to a single fault, that reset"
    )
    func quickstartNaive() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("quickstart-naive-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let (listen, upstream) = DemoPairScenario.ports()
        // At the quickstart's 20 messages a second a reset alone rarely finds one in flight (the first loss then needed
        // the latency that held 0.6 s of them, and the reproducer was two faults); at 500 a second, as an app that
        // streams positions or telemetry sends, every reset cuts some, and the reset alone is the reproducer.
        let naive =
            "chaos demo client --naive --connect 127.0.0.1:{listen.port} --stream c{index} --rate 500 --log {run_dir}/client-{index}.jsonl"
        let run = try await ChaosCLI.run(
            [
                "run", "Scenarios/quickstart.yaml", "--duration", "20s", "--capture",
                "--out", "\(base)/run", "--set", "proxies.stream.listen=127.0.0.1:\(listen)",
                "--set", "proxies.stream.upstream=127.0.0.1:\(upstream)", "--set", "pair.client.run=\(naive)",
            ],
            timeout: 90
        )
        #expect(run.status == 1, "the naive client loses what each reset cuts: \(run.stdout)\n\(run.stderr)")
        let report = try ShrinkCommandTests.json("\(base)/run/report.json")
        let faults = report["faults"] as? [[String: Any]] ?? []
        let failures = report["failures"] as? [[String: Any]] ?? []
        // The losses after a fault (a loaded machine can make the naive client lose its first message with none).
        let lost = failures.filter { $0["kind"] as? String == "lost" && !($0["faults"] as? [Int] ?? []).isEmpty }
        try #require(!lost.isEmpty, "failures[]: \(failures)")
        let resets = faults.filter { $0["kind"] as? String == "disconnect" && ($0["detail"] as? [String: String])?["mode"] == "reset" }
        let resetTimes = resets.compactMap { $0["at_s"] as? Double }
        try #require(!resetTimes.isEmpty, "a reset fault: \(faults)")
        let capture = "\(base)/run/capture.pcap"
        let rsts = try Self.tshark(capture, "tcp.flags.reset == 1", ["frame.time_epoch", "tcp.stream"])
            .compactMap { fields -> (time: Double, stream: String)? in
                guard fields.count == 2, let time = Double(fields[0]) else { return nil }
                return (time, fields[1])
            }
        let origin = try #require(Self.clockOrigin(rsts: rsts.map(\.time), resets: resetTimes), "RSTs in the capture")
        for failure in lost {
            let stream = try #require(failure["stream"] as? String)
            let direction = failure["direction"] as? String == "upstream" ? "up" : "down"
            let seq = try #require(failure["from_seq"] as? Int)
            let last = failure["to_seq"] as? Int ?? seq
            let named = (failure["faults"] as? [Int] ?? []).compactMap { index in faults.first { $0["occurrence"] as? Int == index } }
            #expect(!named.isEmpty, "the loss names the faults before it: \(failure)")
            // The connections (TCP streams of both legs) that carried the lost messages the proxy read (a message still
            // in its producer's socket at the reset never reached the wire), or the last one delivered before them.
            let ids = ([seq - 1] + Array(seq...min(last, seq + 5))).map { "frame contains \"\\\"\(stream)-\(direction)-\($0)\\\"\"" }
            let carriers = Set(try Self.tshark(capture, ids.joined(separator: " || "), ["tcp.stream"]).compactMap(\.first))
            #expect(!carriers.isEmpty, "\(stream)-\(direction)-\(seq - 1)…\(seq) in the capture")
            // One of the named faults is the reset whose RST ended one of them, at its time or after it: before a fault's
            // reset the proxy reads what each leg still holds (up to 64 turns of its event loop, ProxiedConnection+ResetDrain),
            // and a connection whose producer never stops writing (this client, 500 messages a second) is read for all of
            // them, so its RST goes out later than an idle one's (s70cq5: the three connections' RSTs at 0, 63 and 342 ms
            // after the fault's moment, on a loaded machine). The next reset comes 8 s or more later.
            let cutBy = named.filter { fault in
                guard let at = fault["at_s"] as? Double, (fault["detail"] as? [String: String])?["mode"] == "reset" else { return false }
                return rsts.contains { carriers.contains($0.stream) && (-0.05..<2.0).contains($0.time - origin - at) }
            }
            let seen = rsts.map { "\($0.stream)@\(String(format: "%.3f", $0.time - origin))" }.joined(separator: " ")
            #expect(
                !cutBy.isEmpty,
                "\(failure["account"] ?? "?"): none of the named faults reset a connection that carried seq \(seq) (carriers \(carriers.sorted()); RSTs, stream@run time: \(seen))"
            )
        }
        // chaos shrink: the window before the first loss, then one fault.
        let shrink = try await ChaosCLI.run(
            ["shrink", "\(base)/run", "--budget", "4m", "--final-runs", "2", "--warmup", "1s", "--settle", "2s"],
            timeout: 300
        )
        #expect(shrink.status == 0, "\(shrink.stdout)\n\(shrink.stderr)")
        let summary = try ShrinkCommandTests.json("\(base)/run/shrink/shrink.json")
        let reproducer = try #require(summary["reproducer"] as? [String: Any], "\(summary)")
        // The first loss comes from a reset: whatever the naive client sent while it reconnected, and what was in flight,
        // is gone. The reproducer is that one fault.
        let kept = reproducer["occurrences"] as? [Int] ?? []
        let keptKinds = kept.map { index in faults.first { $0["occurrence"] as? Int == index }?["kind"] as? String ?? "?" }
        #expect(keptKinds == ["disconnect"], "the reset alone: \(keptKinds) (\(reproducer))")
        #expect((reproducer["failures"] as? Int ?? 0) >= 1, "\(reproducer)")
    }
}
