import Foundation
import Testing

/// A `chaos run` of a scenario whose pair is one of the Python fixtures (Tests/Fixtures/pairs), and the check that
/// its audit equals the pair's own consumer logs: the shared half of the WebSocket and gRPC pair tests.
enum ThirdPartyPairRun {
    typealias Log = DeliveredMeansAcknowledgedTests.ConsumerLog

    /// Runs the scenario `text(listen, upstream)` on two free ports; returns the run folder, the scenario file and the
    /// exit status. With `capture`, the run also writes capture.pcap and a `tcpdump -i lo` of both legs goes to
    /// `lo.pcap` beside the run folder; with `udpDump`, only the `tcpdump -i lo`, of the UDP legs (a `udp://` proxy's).
    static func run(
        _ name: String,
        capture: Bool,
        udpDump: Bool = false,
        environment: [String: String]? = nil,
        scenario text: (Int, Int) -> String
    ) async throws
        -> (folder: String, scenario: String, status: Int32)
    {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let file = try ChaosCLI.scenarioFile(text(listen, upstream))
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let dump =
            capture || udpDump
            ? try await LoopbackTcpdump.start(ports: [listen, upstream], file: "\(base)/lo.pcap", transport: udpDump ? "udp" : "tcp") : nil
        defer { dump?.kill() }
        let result = try await ChaosCLI.run(
            ["run", file, "--out", "\(base)/run"] + (capture ? ["--capture"] : []),
            timeout: 90,
            environment: environment
        )
        try await dump?.stop()
        #expect(result.status != 2, "\(result.stdout)\n\(result.stderr)")
        return ("\(base)/run", file, result.status)
    }

    /// Checks every stream's ok, lost, duplicated and redelivered against the logs (streams c1 and c2, each way, or
    /// with `oneWay` downstream only) and that nothing failed to decode; returns the audit's totals of lost and
    /// duplicated and the report.
    /// `chaos run Scenarios/NAME.yaml` as a user runs it, its one proxy (`proxy`) on free ports, into a new folder;
    /// the run is expected to pass.
    static func shipped(_ name: String, proxy: String) async throws -> (folder: String, result: ChaosCLI.Result) {
        let (listen, upstream) = DemoPairScenario.ports()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-\(name)-\(UUID().uuidString)").path
        let result = try await ChaosCLI.run(
            [
                "run", ChaosCLI.packageRoot.appendingPathComponent("Scenarios/\(name).yaml").path, "--out", folder,
                "--set", "proxies.\(proxy).listen=127.0.0.1:\(listen)", "--set", "proxies.\(proxy).upstream=127.0.0.1:\(upstream)",
            ],
            timeout: 90
        )
        #expect(result.status == 0, "\(result.stdout.suffix(2000))\n\(result.stderr.suffix(2000))")
        return (folder, result)
    }

    /// `producedThrough`: the producer's last seq (its whole production); the audit's losses past the last seq a consumer
    /// logged, up to it, count with the log's holes: a message the consumer never processed, after which it processed
    /// nothing (a Socket.IO poll answer an `eio-poll-hang` swallowed, holding the server's last event), leaves no hole
    /// in its log. Nil: a loss past the consumer's last seq must be one its producer's log says it dropped on a resume
    /// (the message in flight when the last cut came, which a `--drop-on-resume` producer never sent again).
    static func compare(
        _ folder: String,
        oneWay: Bool = false,
        producedThrough: Int? = nil
    ) throws -> (lost: Int64, duplicated: Int64, json: [String: Any]) {
        let logs = try Log.read(folder)
        let report = try DeliveredMeansAcknowledgedTests.reportJSON(folder)
        // A stream that carried no message, only acks (the server acknowledged a client that got no message the other
        // way in the run, as a fresh-clone run's c1 did), has an empty entry in the report and no line in a log.
        let live = try DeliveredMeansAcknowledgedTests.streams(folder).filter { key, counts in
            logs[key] != nil || ["sent", "delivered", "ok", "lost"].contains { (counts[$0] ?? 0) != 0 }
        }
        let streams = oneWay ? 2 : 4
        #expect(
            logs.count == streams && live.count == streams,
            "c1, c2: audited \(live.keys.sorted()), logged \(logs.keys.sorted()) (\(folder))"
        )
        var lost: Int64 = 0
        var duplicated: Int64 = 0
        for (key, log) in logs {
            let stream = try #require(live[key], "\(key) in the report")
            #expect(
                stream["ok"] == Int64(log.distinct.count),
                "\(key): ok \(stream["ok"] ?? -1) vs \(log.distinct.count) distinct seqs read (\(folder))"
            )
            let last = log.distinct.max() ?? 0
            let pastLast = Self.lostSeqs(report, key: key).filter { $0 > last }
            let trailing = producedThrough.map { through in pastLast.filter { $0 <= through }.count } ?? pastLast.intersection(log.dropped).count
            #expect(
                stream["lost"] == Int64(log.holes.count + trailing),
                "\(key): lost \(stream["lost"] ?? -1) vs log holes \(log.holes.sorted()) and \(trailing) past its last seq"
            )
            #expect(stream["duplicated"] == Int64(log.duplicated), "\(key): duplicated \(stream["duplicated"] ?? -1) vs \(log.duplicated)")
            #expect(stream["redelivered"] == Int64(log.redelivered), "\(key): redelivered \(stream["redelivered"] ?? -1) vs \(log.redelivered)")
            lost += stream["lost"] ?? 0
            duplicated += stream["duplicated"] ?? 0
        }
        let json = report
        let counts = json["anomaly_counts"] as? [String: Any] ?? json["anomalyCounts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "no protocol errors: \(counts)")
        return (lost, duplicated, json)
    }

    /// The seqs the report's `lost` anomalies of `key` ("c1/downstream") name.
    static func lostSeqs(_ report: [String: Any], key: String) -> Set<Int> {
        let parts = key.split(separator: "/").map(String.init)
        let anomalies = report["anomalies"] as? [[String: Any]] ?? []
        return anomalies.reduce(into: []) { seqs, anomaly in
            guard anomaly["class"] as? String == "lost", anomaly["stream"] as? String == parts.first,
                anomaly["direction"] as? String == parts.last, let from = anomaly["from_seq"] as? Int, let to = anomaly["to_seq"] as? Int,
                from <= to
            else { return }
            seqs.formUnion(from...to)
        }
    }
}
