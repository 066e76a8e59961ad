import Foundation
import Testing

/// The aioquic pair of ``QUICPairTests`` with a server that hears each connection from its first address only (as one
/// behind a load balancer that routes by address, `--no-migration`) and clients that connect again and resume when a
/// connection ends (`--reconnect`): a `rebind` kills both connections, and the report must say so.
@Suite("QUIC pair (aioquic) whose server does not migrate: the deaths reported, the resume judged", .serialized, .timeLimit(.minutes(3)))
struct QUICNoMigrationPairTests {
    static let scenario = QUICPairRun.Scenario(
        name: "quic-no-migration",
        duration: "14s",
        seed: 5,
        server: "--no-migration --idle-timeout 2",
        client: "--reconnect --idle-timeout 2 --messages 300 --interval 0.02",
        faults: ["rebind: {at: 3s}"],
        expect: ["lost: 0", "messages: 1000"]
    )

    @Test(
        "a server that hears a connection from its first address only: both connections die on the rebinding, the report says so, and the clients' resume on new connections is judged against their logs"
    )
    func noMigrationDiesAndResumes() async throws {
        let run = try await QUICPairRun.run(Self.scenario)
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let extra = json["extra"] as? [String: Any] ?? [:]
        #expect(extra["quic.paths_changed"] as? String == "2", "both first connections moved: \(extra)")
        #expect(extra["quic.died_on_path_change"] as? String == "2" && extra["quic.migrated"] as? String == "0", "\(extra)")
        #expect((extra["quic.finding"] as? String)?.contains("none sent: the server dropped the packets from the new address") == true)
        // The resume as the logs show it: every stream's ok, lost and duplicated against what its consumer read. A
        // message the consumer read just before the move, whose QUIC ACK then went to the old address (the path died
        // under it) and that no later delivery covers, has no proof of delivery either way: unconfirmed, not lost
        // (s54bq2, before that rule: 1 of 300 on one stream counted lost, the last read on the first connection, its
        // answer come back before the move). At most the ACK delay's worth per stream. Likewise a message read there and
        // sent again is a redelivery in the server's log that the audit may not see.
        let logs = try ThirdPartyPairRun.Log.read(run.folder)
        let live = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        var lost: Int64 = 0
        for (key, log) in logs {
            let stream = try #require(live[key], "\(key) in the report")
            let unconfirmed = stream["unconfirmed"] ?? 0
            #expect((0...3).contains(unconfirmed), "\(key): unconfirmed \(unconfirmed)")
            #expect(
                (stream["ok"] ?? 0) + unconfirmed == Int64(log.distinct.count),
                "\(key): ok \(stream["ok"] ?? -1) + unconfirmed \(unconfirmed) vs \(log.distinct.count) distinct seqs read"
            )
            #expect(stream["lost"] == Int64(log.holes.count), "\(key): lost vs the log's holes \(log.holes.sorted())")
            #expect(stream["duplicated"] == Int64(log.duplicated), "\(key): duplicated")
            #expect((stream["redelivered"] ?? 0) <= Int64(log.redelivered), "\(key): redelivered")
            lost += stream["lost"] ?? 0
        }
        #expect(logs.count == 4, "c1, c2 each way: \(logs.keys.sorted())")
        // Every message each client sent was answered in the end, on the second connection.
        for index in 1...2 {
            let text = try String(contentsOfFile: "\(run.folder)/client-\(index).jsonl", encoding: .utf8)
            #expect(text.contains("\"connections\": 2"), "c\(index) resumed on a second connection")
        }
        #expect(logs["c1/upstream"]?.distinct.count == 300 && logs["c2/upstream"]?.distinct.count == 300, "the resume sent everything")
        #expect(run.status == (lost == 0 ? 0 : 1), "the verdict follows what was lost (\(lost)): \(run.folder)")
    }
}
