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

    /// How long after a reset fault's moment its RSTs go out: before it resets a connection the proxy reads what each leg
    /// still holds (up to 64 turns of its event loop, ProxiedConnection+ResetDrain), connection after connection, and a
    /// connection whose producer never stops writing (the naive client here, 500 messages a second) is read for all of
    /// them (s70cq5: three connections' RSTs 0, 63 and 342 ms after the moment on a loaded machine). The next reset
    /// comes 8 s or more later. The 50 ms before the moment allow for the two clocks' reading.
    static let resetWindow = -0.05..<2.0

    /// Where the run's clock is on the capture's: the offset that puts the most RSTs in a reset fault's window, the fewest
    /// of them before its moment, and of those the latest, so that the first RST of each reset is at its moment (a
    /// reset's RSTs come at or after it). A reset fault cuts every connection, both legs of each; a peer's own reset (a
    /// naive client's on a loaded machine, before any fault) is one connection's, so the first RST of the capture is not
    /// always a fault's; and an offset that centres a reset's later RSTs on its moment puts its first ones before it
    /// (s71q3: connection 4's RSTs 59 ms before the others', which the proxy reset after draining them).
    static func clockOrigin(rsts: [Double], resets: [Double]) -> Double? {
        let candidates = rsts.flatMap { rst in resets.map { rst - $0 } }
        // (RSTs in a window, less those in its 50 ms before the moment, the offset): the greatest.
        func score(_ origin: Double) -> (Int, Int, Double) {
            let offsets = rsts.compactMap { rst in resets.map { rst - origin - $0 }.first { resetWindow.contains($0) } }
            return (offsets.count, -offsets.filter { $0 < 0 }.count, origin)
        }
        return candidates.max { score($0) < score($1) }
    }

    @Test(
        "The run's clock on the capture's: a reset's first RST at its moment, its drained connections' later, a peer's own reset before any fault left out"
    )
    func clockOriginFromResets() throws {
        // s71q3 (the capture's times less 1000 s): connection 4 reset at once, 2 and 3 after 57 ms, 0 and 1 after 69 ms.
        let s71q3 = try #require(Self.clockOrigin(rsts: [1015.961, 1015.961, 1016.018, 1016.019, 1016.029, 1016.030], resets: [16.02]))
        #expect(abs(s71q3 - 999.941) < 0.001, "\(s71q3)")
        // s70cq5: the three connections' RSTs 0, 63 and 342 ms after the reset at 9 s, a second reset at 17 s.
        let s70cq5 = try #require(
            Self.clockOrigin(rsts: [1009.0, 1009.0, 1009.063, 1009.063, 1009.342, 1009.342, 1017.0, 1017.01], resets: [9.0, 17.0])
        )
        #expect(abs(s70cq5 - 1000.0) < 0.001, "\(s70cq5)")
        // s69p: the naive client's own reset 3 s before the first fault is not a fault's.
        let s69p = try #require(Self.clockOrigin(rsts: [1011.2, 1014.21, 1014.21, 1014.25, 1014.25], resets: [14.21]))
        #expect(abs(s69p - 1000.0) < 0.001, "\(s69p)")
        #expect(Self.clockOrigin(rsts: [], resets: [14.21]) == nil)
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
            // One of the named faults is the reset whose RST ended one of them, in its window (resetWindow says why it is
            // two seconds long).
            let cutBy = named.filter { fault in
                guard let at = fault["at_s"] as? Double, (fault["detail"] as? [String: String])?["mode"] == "reset" else { return false }
                return rsts.contains { carriers.contains($0.stream) && Self.resetWindow.contains($0.time - origin - at) }
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
