import Foundation
import Testing

/// `Scenarios/websocket.yaml` as a user runs it: the WebSocket reference pair passes; the naive client (no resume,
/// no retransmission, no heartbeat) fails, and the audit's losses are exactly the holes in its consumers' logs.
@Suite("Scenarios/websocket.yaml with the built-in WebSocket pair", .serialized)
struct ShippedWebSocketScenarioTests {
    private func run(naive: Bool) async throws -> (result: ChaosCLI.Result, folder: URL) {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-ws-\(UUID().uuidString)")
        // The naive run reaches the handoff (46 s): its blackout drops what was in flight, which a naive client never
        // resends, so it loses messages whatever the timing; a reset alone may catch nothing in flight.
        var arguments = ["run", "Scenarios/websocket.yaml", "--duration", naive ? "50s" : "25s", "--out", folder.path,
                         "--set", "proxies.ws.listen=127.0.0.1:\(listen)", "--set", "proxies.ws.upstream=127.0.0.1:\(upstream)"]
        if naive {
            arguments += ["--set", "pair.client.run=chaos demo client --naive --transport websocket --connect 127.0.0.1:{listen.port} "
                + "--stream w{index} --rate 20 --log {run_dir}/client-{index}.jsonl"]
        }
        return (try await ChaosCLI.run(arguments, timeout: 90), folder)
    }

    @Test("the naive WebSocket client fails it: lost > 0, exactly the seqs its consumers' logs never show")
    func naiveFails() async throws {
        let (result, folder) = try await run(naive: true)
        #expect(result.status == 1, "exit \(result.status): \(result.stdout)\n\(result.stderr)")
        let run = RunFolderUnderTest(folder: folder, result: result, listenPort: 0, upstreamPort: 0)
        let report = try run.report()
        let truth = try GroundTruthLog(folder: folder)
        #expect(report.totals.lost > 0)
        for stream in report.streams {
            #expect(stream.lost == Int64(truth.holes(stream.key).count), "\(stream.key): audit lost vs log holes")
            #expect(stream.ok == Int64(truth.distinct(stream.key).count), "\(stream.key): audit ok vs seqs processed")
        }
        run.remove()
    }

    @Test("the resilient WebSocket pair passes it: lost 0, duplicated 0, counts equal its logs")
    func resilientPasses() async throws {
        let (result, folder) = try await run(naive: false)
        #expect(result.status == 0, "exit \(result.status): \(result.stdout)\n\(result.stderr)")
        let run = RunFolderUnderTest(folder: folder, result: result, listenPort: 0, upstreamPort: 0)
        let report = try run.report()
        let truth = try GroundTruthLog(folder: folder)
        #expect(report.totals.lost == 0 && report.totals.duplicated == 0)
        for stream in report.streams {
            #expect(stream.ok == Int64(truth.distinct(stream.key).count), "\(stream.key): audit ok vs seqs processed")
        }
        run.remove()
    }
}
