import Foundation
import Testing

/// A half-open partition while data flows both ways: when it lifts, the proxy flushes what it held into
/// connections the pair already abandoned, and the peers' kernels answer with resets. Those bytes were
/// written, never read: the audit must not count them delivered. Checked against an independent Python
/// pair (Tests/Fixtures/pairs/resumable_pair.py) that logs every message its consumers read.
@Suite("Delivered = acknowledged by the consumer's TCP: no false PASS", .serialized, .timeLimit(.minutes(3)))
struct DeliveredMeansAcknowledgedTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/resumable_pair.py").path

    static func scenario(listen: Int, upstream: Int, dropOnResume: Int) -> String {
        let common = "--send-for 11 --heartbeat 1 --timeout 2.5 --drop-on-resume \(dropOnResume)"
        return """
            name: half-open-partition
            duration: 15s
            seed: 5
            proxies:
              - {name: stream, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
            pair:
              server:
                run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl \(common)
                ready: tcp 127.0.0.1:{upstream.port}
              client:
                run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --stream c{index} --log {run_dir}/client-{index}.jsonl \(common)
                count: 2
                ready: connected
            protocol:
              framing: lines
              seq: seq
              stream: stream
              ack: ack
              ignore: {type: [PING, PONG, HELLO, WELCOME, ACK]}
            faults:
              - partition: {at: 2s, for: 6s, direction: both}
              - disconnect: {at: 9s, mode: reset}
              - disconnect: {at: 10s, mode: close}
            expect:
              lost: 0
              duplicated: 0
            """
    }

    /// What the pair's consumers logged, per stream and direction.
    struct ConsumerLog {
        var distinct: Set<Int> = []
        var redelivered = 0
        var duplicated = 0
        /// What this stream's producer dropped on a resume (its own log says so).
        var dropped: Set<Int> = []
        var holes: Set<Int> { Set(1...max(distinct.max() ?? 0, 1)).subtracting(distinct).filter { _ in !distinct.isEmpty } }

        /// Whether `lost` (the audit's lost seqs) is what this log shows: every hole, and past the last seq read only
        /// messages the producer dropped (a message in flight when a cut came, which it never sent again: its TCP had
        /// it acknowledged by the proxy, and no later read shows a hole there).
        func accounts(forLost lost: Set<Int>) -> Bool {
            let last = distinct.max() ?? 0
            return lost.isSuperset(of: holes) && lost.subtracting(holes).allSatisfy { $0 > last && dropped.contains($0) }
        }

        static func read(_ folder: String) throws -> [String: ConsumerLog] {
            var logs: [String: ConsumerLog] = [:]
            var firstConnection: [String: [Int: Int]] = [:]
            let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".jsonl") }
            for name in names.sorted() {
                let text = try String(contentsOfFile: "\(folder)/\(name)", encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                    if object?["event"] as? String == "dropped", let stream = object?["stream"] as? String, let seq = object?["seq"] as? Int {
                        // The server produces downstream, each client upstream.
                        logs["\(stream)/\(name.hasPrefix("server") ? "downstream" : "upstream")", default: .init()].dropped.insert(seq)
                        continue
                    }
                    guard let object, let stream = object["stream"] as? String, let direction = object["dir"] as? String,
                        let seq = object["seq"] as? Int, let connection = object["conn"] as? Int
                    else { continue }
                    let key = "\(stream)/\(direction == "up" ? "upstream" : "downstream")"
                    if let first = firstConnection[key]?[seq] {
                        if first == connection { logs[key, default: .init()].duplicated += 1 } else { logs[key, default: .init()].redelivered += 1 }
                    } else {
                        firstConnection[key, default: [:]][seq] = connection
                        logs[key, default: .init()].distinct.insert(seq)
                    }
                }
            }
            return logs
        }
    }

    /// Runs the scenario (with our capture and a tcpdump of loopback) and returns the run folder, the
    /// scenario file, the tcpdump file and the exit status.
    static func run(dropOnResume: Int, tcpdump: Bool) async throws -> (folder: String, scenario: String, tcpdump: String, status: Int32) {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let file = try ChaosCLI.scenarioFile(scenario(listen: listen, upstream: upstream, dropOnResume: dropOnResume))
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("acked-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let dumpFile = "\(base)/lo.pcap"
        let dump = tcpdump ? try await LoopbackTcpdump.start(ports: [listen, upstream], file: dumpFile) : nil
        defer { dump?.kill() }
        let result = try await ChaosCLI.run(["run", file, "--capture", "--out", "\(base)/run"], timeout: 90)
        #expect(result.status != 2, "\(result.stdout)\n\(result.stderr)")
        try await dump?.stop()
        return ("\(base)/run", file, dumpFile, result.status)
    }

    static func reportJSON(_ folder: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(folder)/report.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func streams(_ folder: String) throws -> [String: [String: Int64]] {
        let json = try reportJSON(folder)
        var result: [String: [String: Int64]] = [:]
        for stream in try #require(json["streams"] as? [[String: Any]]) {
            let key = "\(stream["stream"] as? String ?? "")/\(stream["direction"] as? String ?? "")"
            result[key] = stream.compactMapValues { ($0 as? NSNumber)?.int64Value }
        }
        return result
    }

    static func lostSeqs(_ folder: String) throws -> [String: Set<Int>] {
        let json = try reportJSON(folder)
        var result: [String: Set<Int>] = [:]
        for anomaly in try #require(json["anomalies"] as? [[String: Any]]) where anomaly["class"] as? String == "lost" {
            let key = "\(anomaly["stream"] as? String ?? "")/\(anomaly["direction"] as? String ?? "")"
            guard let from = anomaly["from_seq"] as? Int, let to = anomaly["to_seq"] as? Int, from <= to else { continue }
            result[key, default: []].formUnion(from...to)
        }
        return result
    }

    @Test("a producer that drops a message on resume: lost equals what the consumers' logs never show, live and from both captures")
    func droppingProducerFails() async throws {
        let run = try await Self.run(dropOnResume: 1, tcpdump: true)
        #expect(run.status == 1, "the run must fail: the pair lost messages")
        let logs = try ConsumerLog.read(run.folder)
        let live = try Self.streams(run.folder)
        let lost = try Self.lostSeqs(run.folder)
        #expect(logs.count == 4 && live.count == 4, "c1, c2 each way: \(live.keys.sorted())")
        var totalLost: Int64 = 0
        for (key, log) in logs {
            let stream = try #require(live[key], "\(key) in the report")
            #expect(stream["lost"] == Int64(lost[key, default: []].count), "\(key): lost \(stream["lost"] ?? -1) vs its anomalies")
            #expect(
                log.accounts(forLost: lost[key, default: []]),
                "\(key): lost seqs \(lost[key, default: []].sorted()), log holes \(log.holes.sorted()), dropped \(log.dropped.sorted())"
            )
            #expect(stream["ok"] == Int64(log.distinct.count), "\(key): ok vs distinct seqs read")
            #expect(stream["redelivered"] == Int64(log.redelivered), "\(key): redelivered vs the log")
            #expect(stream["duplicated"] == Int64(log.duplicated), "\(key): duplicated vs the log")
            totalLost += stream["lost"] ?? 0
        }
        #expect(totalLost > 0, "the buggy producer dropped messages on resume")
        let sent = live.values.reduce(0) { $0 + ($1["sent"] ?? 0) }
        let delivered = live.values.reduce(0) { $0 + ($1["delivered"] ?? 0) }
        #expect(sent > delivered, "messages were flushed into connections the pair had abandoned, and not counted delivered")

        let ours = try await ChaosCLI.run([
            "audit", "\(run.folder)/capture.pcap", "--protocol-from", run.scenario,
            "--out", "\(run.folder)-ours",
        ])
        #expect(ours.status == 1, "\(ours.stdout)\n\(ours.stderr)")
        let theirs = try await ChaosCLI.run(["audit", run.tcpdump, "--protocol-from", run.scenario, "--out", "\(run.folder)-tcpdump"])
        #expect(theirs.status == 1, "\(theirs.stdout)\n\(theirs.stderr)")
        var offlineMatches = true
        for (name, folder) in [("our capture", "\(run.folder)-ours"), ("tcpdump -i lo", "\(run.folder)-tcpdump")] {
            let offline = try Self.streams(folder)
            for (key, stream) in live {
                for count in ["delivered", "ok", "lost", "duplicated", "redelivered", "reordered", "gaps"] {
                    #expect(
                        offline[key]?[count] == stream[count],
                        "\(name) \(key) \(count): \(offline[key]?[count] ?? -1), live \(stream[count] ?? -1) (\(run.folder))"
                    )
                    if offline[key]?[count] != stream[count] { offlineMatches = false }
                }
            }
        }
        // A failed run's folder stays for a look.
        if offlineMatches, !live.isEmpty, logs.allSatisfy({ $0.value.accounts(forLost: lost[$0.key, default: []]) }) {
            try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path)
        }
    }

    @Test("a correct producer passes, and redelivered and duplicated equal what the consumers' logs show")
    func correctProducerPasses() async throws {
        let run = try await Self.run(dropOnResume: 0, tcpdump: false)
        #expect(run.status == 0, "the run must pass")
        let logs = try ConsumerLog.read(run.folder)
        let live = try Self.streams(run.folder)
        #expect(logs.count == 4 && live.count == 4)
        for (key, log) in logs {
            let stream = try #require(live[key], "\(key) in the report")
            #expect(log.holes.isEmpty, "\(key): the correct pair's log has holes \(log.holes.sorted())")
            #expect(stream["lost"] == 0, "\(key)")
            #expect(stream["ok"] == Int64(log.distinct.count), "\(key): ok vs distinct seqs read")
            #expect(
                stream["redelivered"] == Int64(log.redelivered),
                "\(key): audit redelivered \(stream["redelivered"] ?? -1), log \(log.redelivered)"
            )
            #expect(stream["duplicated"] == Int64(log.duplicated), "\(key): duplicated vs the log")
        }
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path)
    }
}
