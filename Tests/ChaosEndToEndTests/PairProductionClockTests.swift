import Foundation
import Testing

/// The ground-truth pairs' `--send-for` clock counts per stream, from that stream's first connection. A server whose
/// clock started at its first client's connection produced nothing for a second client that a loaded machine started
/// seconds later: that stream then had no downstream in the logs nor in the audit, and a test that expects both
/// clients each way failed (fresh-clone run s57dq3, the WebSocket pair over wss).
/// Its own waits bound it (each client's connection at most 30 s, 5 s of production, 1.5 s per stop): the limit is for
/// a hang, past the 72 s that two Python clients' start-up took beside the twelve other lanes (s65's loop).
@Suite("Pair fixtures: --send-for counts from each stream's first connection", .timeLimit(.minutes(3)))
struct PairProductionClockTests {
    @Test("a WebSocket pair's second client, started after the server's production time for the first ended, still gets messages")
    func lateClientStillServed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pair-clock-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let script = LoopbackTLSPair.pairs.appendingPathComponent("resumable_ws_pair.py").path
        let port = ChaosCLI.freePort()
        let common = ["--send-for", "1.5", "--heartbeat", "1", "--timeout", "2.5", "--rate", "20"]
        var server = LoopbackTLSPair.Children()
        var clients = LoopbackTLSPair.Children()
        defer {
            clients.kill()
            server.kill()
        }
        try server.start(
            [script, "server", "--listen", "127.0.0.1:\(port)", "--log", "\(folder)/server.jsonl"] + common,
            output: "\(folder)/server.out"
        )
        try await LoopbackTLSPair.waitUntilAccepting(port, folder: folder)
        func startClient(_ index: Int) throws {
            try clients.start(
                [script, "client", "--connect", "127.0.0.1:\(port)", "--stream", "c\(index)", "--log", "\(folder)/client-\(index).jsonl"]
                    + common,
                output: "\(folder)/client-\(index).out"
            )
        }
        try startClient(1)
        try await LoopbackTLSPair.waitUntilConnected(clients: 1, folder: folder)
        // Past the first stream's production time on the server's clock before the second client starts.
        try await Task.sleep(nanoseconds: 2_500_000_000)
        try startClient(2)
        try await LoopbackTLSPair.waitUntilConnected(clients: 2, folder: folder)
        try await Task.sleep(nanoseconds: 2_500_000_000)
        try await clients.stop()
        try await server.stop()
        var checks = TLSCaptureAuditTests.Checks(folder: folder)
        let read = try DeliveredMeansAcknowledgedTests.ConsumerLog.read(folder).mapValues(\.distinct.count)
        for key in ["c1/downstream", "c1/upstream", "c2/downstream", "c2/upstream"] {
            checks.expect(read[key, default: 0] > 0, "\(key) read nothing: \(read)")
        }
        // Each stream produced for its own 1.5 s at 20 messages a second, not more: the clock still ends production.
        checks.expect(read.values.allSatisfy { $0 <= 40 }, "\(read)")
        checks.removeIfPassed()
    }
}
