import Foundation
import Testing

/// A real third-party MQTT setup through chaos: Debian's `mosquitto` as the broker (`pair.server`), PyPI `paho-mqtt`
/// clients (Tests/Fixtures/pairs/mqtt_pair.py: one publisher, two subscribers on persistent sessions, all through the
/// same proxy, reconnecting on their own) with resets and a partition. The audit's counts equal the clients' own
/// logs: what the publisher logged as acknowledged by the broker is the topic's upstream stream, and what each
/// subscriber logged is its own copy of the topic downstream, named by its client id.
@Suite("MQTT pair: the audit equals the clients' own logs, per subscriber", .serialized, .timeLimit(.minutes(3)))
struct MQTTPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/mqtt_pair.py").path

    /// The broker's configuration: the upstream port on loopback, anonymous clients, no persistence on disk, no
    /// limit on the messages it queues for a subscriber that is away.
    static func brokerConfiguration(port: Int) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("mosquitto-\(UUID().uuidString).conf").path
        let text = "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    static func scenario(listen: Int, upstream: Int, qos: Int, clean: Bool) throws -> String {
        let configuration = try brokerConfiguration(port: upstream)
        return """
            name: mqtt-pair
            duration: 14s
            seed: 9
            proxies:
              - {name: broker, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
            pair:
              server:
                run: /usr/sbin/mosquitto -c \(configuration)
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 1s
              client:
                run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --index {index} --publishers 1 --qos \(qos) --publish-for 8 --log {run_dir}/client-{index}.jsonl\(clean ? " --clean" : "")
                count: 3
                ready: connected
                stop_grace: 2s
            protocol:
              framing: mqtt
              format: json
              seq: seq
              stream: topic
            faults:
              - disconnect: {at: 2s, mode: reset}
              - partition: {at: 4s, for: 1500ms, direction: both}
              - disconnect: {at: 7s, mode: reset}
            expect:
              lost: 0
            """
    }

    /// What the clients logged: distinct seqs per (topic, direction, receiver).
    static func logged(_ folder: String) throws -> [String: Set<Int64>] {
        var seqs: [String: Set<Int64>] = [:]
        for index in 1...3 {
            let text = try String(contentsOfFile: "\(folder)/client-\(index).jsonl", encoding: .utf8)
            for line in text.split(separator: "\n") {
                guard let record = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let seq = record["seq"] as? Int, let stream = record["stream"] as? String, let way = record["dir"] as? String
                else { continue }
                let key = "\(stream) \(way == "up" ? "upstream" : "downstream") \(record["receiver"] as? String ?? "-")"
                seqs[key, default: []].insert(Int64(seq))
            }
        }
        return seqs
    }

    /// The report's streams by the same key, with their counts.
    static func audited(_ folder: String) throws -> [String: [String: Any]] {
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(folder)
        var streams: [String: [String: Any]] = [:]
        for stream in try #require(json["streams"] as? [[String: Any]]) {
            let key = "\(stream["stream"] as? String ?? "?") \(stream["direction"] as? String ?? "?") \(stream["receiver"] as? String ?? "-")"
            streams[key] = stream
        }
        return streams
    }

    @Test("QoS 1 and 2, persistent sessions: the run passes; the publisher's stream and each subscriber's copy equal their logs", arguments: [1, 2])
    func persistentSessions(qos: Int) async throws {
        let run = try await ThirdPartyPairRun.run("mqtt-pair", capture: false) {
            try! Self.scenario(listen: $0, upstream: $1, qos: qos, clean: false)
        }
        let logs = try Self.logged(run.folder)
        let streams = try Self.audited(run.folder)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        #expect(
            Set(logs.keys) == ["fleet/1 upstream -", "fleet/1 downstream sub-2", "fleet/1 downstream sub-3"] && Set(streams.keys) == Set(logs.keys),
            "\(logs.keys.sorted()) vs \(streams.keys.sorted()) (\(run.folder))"
        )
        for (key, seqs) in logs {
            let ok = streams[key]?["ok"] as? Int ?? -1
            #expect(ok == seqs.count && seqs.count >= 100, "\(key): audit ok \(ok) vs \(seqs.count) distinct seqs logged (\(run.folder))")
            #expect(streams[key]?["lost"] as? Int == 0, "\(key): \(streams[key] ?? [:])")
        }
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let events = try #require(json["protocol_events"] as? [String: Any])
        #expect((events["mqtt_connects"] as? Int ?? 0) >= 6, "a CONNECT per client, then one after each cut: \(events)")
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "no protocol errors: \(counts)")
    }

    @Test("a subscriber on a clean session misses what was published while it was away: lost, for that subscriber, as its log says")
    func cleanSessionLoses() async throws {
        let run = try await ThirdPartyPairRun.run("mqtt-clean", capture: false) { try! Self.scenario(listen: $0, upstream: $1, qos: 1, clean: true) }
        let logs = try Self.logged(run.folder)
        let streams = try Self.audited(run.folder)
        #expect(run.status == 1, "the run must fail (\(run.folder))")
        var lost = 0
        var atBroker = 0
        for (key, seqs) in logs where key.hasPrefix("fleet/1 downstream") {
            let stream = try #require(streams[key], "\(key) in the report (\(run.folder))")
            #expect(stream["ok"] as? Int == seqs.count, "\(key): ok \(stream["ok"] ?? "?") vs \(seqs.count) logged (\(run.folder))")
            let holes = (seqs.min()!...seqs.max()!).filter { !seqs.contains($0) }.count
            #expect(stream["lost"] as? Int ?? -1 >= holes, "\(key): lost \(stream["lost"] ?? "?") vs \(holes) holes in its log")
            lost += stream["lost"] as? Int ?? 0
            atBroker += (stream["lost_where"] as? [String: Any])?["at_server"] as? Int ?? 0
        }
        #expect(lost > 0, "a clean-session subscriber must lose messages through the cuts (\(run.folder))")
        // The broker had them (the publisher's stream lost nothing) and forgot each clean session while it was away.
        #expect(atBroker > 0, "the losses died at the broker (\(run.folder))")
    }
}
