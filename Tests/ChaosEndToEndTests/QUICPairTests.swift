import Foundation
import Testing

/// A QUIC pair on PyPI's aioquic (Tests/Fixtures/pairs/quic_pair.py: newline JSON on a bidirectional stream each way,
/// the clients writing their key log) through a `udp://` proxy of `chaos run` with `protocol: {transport: quic}`:
/// loss, jitter, a partition, a NAT rebinding and a WiFi → LTE handoff to a new address, which QUIC's retransmission
/// and connection migration survive. The audit
/// opens every packet with the key log as the run goes, and its ok per stream equals what each end logged reading; and
/// `chaos audit` of a `tcpdump -i lo` of the same run (both legs, the server's moved twice) with the key log gives the
/// same counts.
@Suite("QUIC pair (aioquic): the live audit of QUIC streams equals the ends' logs", .serialized, .timeLimit(.minutes(3)))
struct QUICPairTests {
    static let scenario = QUICPairRun.Scenario(
        name: "quic-pair",
        duration: "15s",
        seed: 4,
        client: "--messages 400 --interval 0.02",
        faults: [
            "loss: {at: 1s, for: 2s, rate: 5%}", "latency: {at: 3s, for: 1500ms, add: 20ms, jitter: 15ms}",
            "partition: {at: 5s, for: 1s}", "rebind: {at: 6800ms}",
            "handoff: {at: 7500ms, blackout: 400ms, from: wifi, to: lte, new_address: [127.0.0.2]}",
        ],
        expect: ["lost: 0", "messages: 1500"]
    )

    @Test(
        "loss, jitter, a partition, a rebinding and a handoff to a new address: every stream's ok equals the logs, nothing lost, every packet opened, the server's last reads from the new address; a capture of it audits the same"
    )
    func auditEqualsLogs() async throws {
        let run = try await QUICPairRun.run(Self.scenario, tcpdump: true)
        defer { try? FileManager.default.removeItem(atPath: run.keys) }
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, _, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0)
        let extra = json["extra"] as? [String: Any] ?? [:]
        #expect(Int(extra["proxy.quic.datagrams_dropped.loss"] as? String ?? "") ?? 0 > 0, "the loss dropped packets: \(extra)")
        #expect(Int(extra["proxy.quic.datagrams_dropped.dead-path"] as? String ?? "") ?? 0 > 0, "the partition dropped packets")
        // Two flows, each moved by the rebinding and again by the handoff.
        #expect(Int(extra["proxy.quic.flows_rebound"] as? String ?? "") ?? 0 >= 4, "the rebinding and the handoff moved the flows: \(extra)")
        // Each client sends for at least 8 s from its start (400 messages, 20 ms apart), past the handoff's end at 7.9 s:
        // its last messages reach the server from the new address, on the same connection (aioquic validated the path).
        let server = try String(contentsOfFile: "\(run.folder)/server.jsonl", encoding: .utf8).split(separator: "\n")
        var lastPeer: [String: String] = [:]
        for line in server {
            guard let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let stream = entry["stream"] as? String, let peer = entry["peer"] as? String
            else { continue }
            lastPeer[stream] = peer
        }
        #expect(lastPeer == ["c1": "127.0.0.2", "c2": "127.0.0.2"], "where each stream's last message came from: \(lastPeer)")
        // The report's verdict per connection: both paths changed twice, the server challenged each new path and the
        // client answered, so both connections migrated, their streams stalled a while across the handoff's blackout.
        #expect(extra["quic.paths_changed"] as? String == "2", "\(extra)")
        #expect(extra["quic.migrated"] as? String == "2" && extra["quic.died_on_path_change"] as? String == "0", "\(extra)")
        // Every path change the audit judged was validated: at least one per connection, at most its two moves (fresh-clone
        // runs on a loaded machine judged 3 and 2 of the 4 moves as changes, every one answered: s61q1, s61cq1).
        let validations = (extra["quic.path_validations"] as? String ?? "").split(separator: " ").compactMap { Int($0) }
        #expect(validations.count == 2 && validations[0] == validations[1] && (2...4).contains(validations[1]), "\(extra)")
        #expect(Double(extra["quic.migration_stall_s"] as? String ?? "") ?? 0 > 0, "\(extra)")
        #expect(extra["quic.finding"] == nil, "\(extra)")
        #expect(extra["quic.packets_unopened"] as? String == "0", "every packet opened: \(extra)")
        try await Self.captureAuditsTheSame(run, live: extra)
    }

    /// `chaos audit` of the run's `tcpdump -i lo` with its key log: the client's legs and the proxy's server legs
    /// (three per connection: the first, the rebinding's, the handoff's from 127.0.0.2) paired by the connection IDs
    /// their packets carry, each datagram read where its sender sent it and written where it reached its receiver, as
    /// the live proxy saw them: every stream's counts and every connection's verdict are the live run's.
    static func captureAuditsTheSame(
        _ run: (folder: String, scenario: String, status: Int32, keys: String, tcpdump: String?),
        live extra: [String: Any]
    ) async throws {
        let dump = try #require(run.tcpdump)
        let out = run.folder + "-tcpdump"
        let audit = try await ChaosCLI.run(["audit", dump, "--protocol-from", run.scenario, "--keylog", run.keys, "--out", out])
        #expect(audit.status == 0, "\(audit.stdout)\n\(audit.stderr)")
        let live = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        let captured = try DeliveredMeansAcknowledgedTests.streams(out)
        #expect(
            live.count == 4 && captured.keys.sorted() == live.keys.sorted(),
            "streams: live \(live.keys.sorted()), capture \(captured.keys.sorted())"
        )
        for (key, stream) in live.sorted(by: { $0.key < $1.key }) {
            #expect((stream["ok"] ?? 0) > 0, "\(key): counted")
            for count in ["ok", "lost", "duplicated", "redelivered", "unconfirmed"] {
                #expect(
                    (captured[key]?[count] ?? 0) == (stream[count] ?? 0),
                    "\(key) \(count): capture \(captured[key]?[count] ?? -1), live \(stream[count] ?? -1)"
                )
            }
        }
        let report = try DeliveredMeansAcknowledgedTests.reportJSON(out)
        let facts = report["extra"] as? [String: Any] ?? [:]
        #expect(facts["capture.quic_connections"] as? String == "2", "one connection per client, its legs paired: \(facts)")
        #expect(facts["capture.quic_packets_unopened"] as? String == "0", "\(facts)")
        for fact in ["quic.paths_changed", "quic.migrated", "quic.died_on_path_change", "quic.path_validations"] {
            #expect(facts[fact] as? String == extra[fact] as? String, "\(fact): capture \(facts[fact] ?? "-"), live \(extra[fact] ?? "-")")
        }
    }
}
