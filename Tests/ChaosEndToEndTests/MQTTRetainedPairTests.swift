import Foundation
import Testing

/// Copies beyond the first, through chaos and a real broker (Debian's `mosquitto`, PyPI `paho-mqtt` clients):
/// - retained messages (mqtt_pair.py `--retain`): the broker sends each subscriber the topic's last message again every
///   time it subscribes, which a reconnecting paho subscriber does after each cut. Those copies are retained state,
///   not duplicates: the audit counts them as `retained`, exactly as the subscribers' own logs show them;
/// - a subscriber that processes a DUP twice: its PUBACKs held back and then cut, the broker sends it again what it had
///   already handed its application, and paho (QoS 1 has no dedup) hands it on again. The audit counts each such copy
///   as the logs show it, and a run that expects none fails.
@Suite("MQTT copies beyond the first: retained ones and DUPs processed twice, as the subscribers' logs show", .serialized, .timeLimit(.minutes(3)))
struct MQTTRetainedPairTests {
    /// One subscriber's log for one topic: each PUBLISH paho handed it, in order, with its retain flag.
    struct Copies {
        var order: [(seq: Int64, retained: Bool)] = []

        /// The extra deliveries the audit counts as retained: every retained copy of a seq the subscriber already had,
        /// and, for a seq whose first copy was a retained one, the live copy that followed it.
        var retainedExtras: Int {
            var had: Set<Int64> = []
            var retainedFirst: Set<Int64> = []
            var extras = 0
            for (seq, retained) in order {
                if retained {
                    if had.insert(seq).inserted { retainedFirst.insert(seq) } else { extras += 1 }
                } else if retainedFirst.remove(seq) != nil {
                    extras += 1
                } else {
                    had.insert(seq)
                }
            }
            return extras
        }

        /// Every copy beyond the first of its seq.
        var extras: Int { order.count - Set(order.map(\.seq)).count }
    }

    /// The subscribers' logs, per "topic downstream receiver" key.
    static func copies(_ folder: String) throws -> [String: Copies] {
        var copies: [String: Copies] = [:]
        for index in 1...3 {
            let text = try String(contentsOfFile: "\(folder)/client-\(index).jsonl", encoding: .utf8)
            for line in text.split(separator: "\n") {
                guard let record = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    record["dir"] as? String == "down", let seq = record["seq"] as? Int, let stream = record["stream"] as? String,
                    let receiver = record["receiver"] as? String
                else { continue }
                copies["\(stream) downstream \(receiver)", default: Copies()].order.append((Int64(seq), record["retained"] as? Bool ?? false))
            }
        }
        return copies
    }

    @Test(
        "QoS 1 retained messages through resets and a partition: each subscriber's retained copies counted as retained, equal to its log; no duplicate is charged for them; the run passes"
    )
    func retainedCountedAsRetained() async throws {
        let run = try await ThirdPartyPairRun.run("mqtt-retained", capture: false) {
            try! MQTTPairTests.scenario(listen: $0, upstream: $1, qos: 1, clean: false, inflightLimit: 0, flags: "--retain")
        }
        let logs = try MQTTPairTests.logged(run.folder)
        let streams = try MQTTPairTests.audited(run.folder)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        for (key, seqs) in logs {
            #expect(
                MQTTPairTests.matches(streams[key], seqs) && seqs.count >= 50,
                "\(key): \(streams[key] ?? [:]) vs \(seqs.count) logged (\(run.folder))"
            )
        }
        var retained = 0
        for (key, copies) in try Self.copies(run.folder) {
            let stream = try #require(streams[key], "\(key) (\(run.folder))")
            let counted = stream["retained"] as? Int ?? -1
            #expect(counted == copies.retainedExtras, "\(key): audit retained \(counted), its log \(copies.retainedExtras) (\(run.folder))")
            let charged = (stream["duplicated"] as? Int ?? 0) + (stream["redelivered"] as? Int ?? 0)
            #expect(
                charged == copies.extras - copies.retainedExtras,
                "\(key): duplicated + redelivered \(charged), log \(copies.extras) extra copies"
            )
            retained += counted
        }
        // Two resets and a partition: every subscriber re-subscribes at least twice, and gets the last message again.
        #expect(retained >= 2, "retained copies counted: \(retained) (\(run.folder))")
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let totals = try #require(json["totals"] as? [String: Any])
        #expect(totals["retained"] as? Int == retained)
        let report = try String(contentsOfFile: "\(run.folder)/report.md", encoding: .utf8)
        #expect(report.contains("\(retained) retained message(s) sent again on a new subscription"), "report.md says so")
        if run.status == 0 { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path) }
    }

    @Test(
        "a subscriber that processes a DUP twice (its PUBACKs held, then cut): each subscriber's redelivered copies equal its log's; a run that expects none fails"
    )
    func dupProcessedTwice() async throws {
        let run = try await ThirdPartyPairRun.run("mqtt-dup", capture: false) { listen, upstream in
            let scenario = MQTTPairTests.apart(
                name: "mqtt-dup",
                duration: "14s",
                seed: 9,
                listen: listen,
                upstream: upstream,
                configuration: try! MQTTPairTests.brokerConfiguration(port: upstream, inflightLimit: 0),
                client: "--qos 1 --publish-for 8 --keepalive 20",
                // The subscribers' PUBACKs are held for 2 s while the broker's PUBLISHes still reach them, then cut.
                faults: [
                    "stall: {at: 2s, for: 3s, direction: upstream, proxy: subscribers}",
                    "disconnect: {at: 4s, mode: reset, proxy: subscribers}",
                ]
            )
            return scenario.replacingOccurrences(of: "  lost: 0", with: "  lost: 0\n  redelivered: 0\n  duplicated: 0")
        }
        let logs = try MQTTPairTests.logged(run.folder)
        let streams = try MQTTPairTests.audited(run.folder)
        var extras = 0
        for (key, copies) in try Self.copies(run.folder) {
            let stream = try #require(streams[key], "\(key) (\(run.folder))")
            #expect(MQTTPairTests.matches(stream, logs[key] ?? []), "\(key): \(stream) vs \(logs[key]?.count ?? 0) logged (\(run.folder))")
            let counted = (stream["duplicated"] as? Int ?? 0) + (stream["redelivered"] as? Int ?? 0)
            #expect(counted == copies.extras, "\(key): duplicated + redelivered \(counted), its log \(copies.extras) copies beyond the first")
            #expect(stream["lost"] as? Int == 0, "\(key): \(stream)")
            extras += copies.extras
        }
        #expect(extras >= 10, "the held PUBACKs made the broker send again what both subscribers had processed: \(extras)")
        #expect(run.status == 1, "redelivered > 0 fails the run's expect (\(run.folder))")
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let expectations = json["expectations"] as? [[String: Any]] ?? []
        #expect(expectations.contains { $0["name"] as? String == "redelivered" && $0["ok"] as? Int == 0 }, "\(expectations)")
    }
}
