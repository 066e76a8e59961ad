import Foundation
import Testing

/// `Scenarios/grpc.yaml` as a user runs it: the gRPC reference pair passes; the naive client (no resume, no
/// retransmission, no keepalive) fails, and the audit's losses are exactly the holes in its consumers' logs.
@Suite("Scenarios/grpc.yaml with the built-in gRPC pair", .serialized, .timeLimit(.minutes(3)))
struct ShippedGRPCScenarioTests {
    private func run(naive: Bool) async throws -> (result: ChaosCLI.Result, folder: URL) {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-grpc-\(UUID().uuidString)")
        // The naive run reaches the handoff (46 s): its blackout drops what was in flight, which a naive client never
        // resends, so it loses messages whatever the timing. The resilient run's 25 s hold resets, a GOAWAY and a FIN.
        var arguments = ["run", "Scenarios/grpc.yaml", "--duration", naive ? "50s" : "25s", "--out", folder.path,
                         "--set", "proxies.grpc.listen=127.0.0.1:\(listen)", "--set", "proxies.grpc.upstream=127.0.0.1:\(upstream)"]
        if naive {
            arguments += ["--set", "pair.client.run=chaos demo client --naive --transport grpc --connect 127.0.0.1:{listen.port} "
                + "--stream g{index} --rate 20 --log {run_dir}/client-{index}.jsonl"]
        }
        return (try await ChaosCLI.run(arguments, timeout: 90), folder)
    }

    @Test("the naive gRPC client fails it: lost > 0, exactly the seqs its consumers' logs never show")
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

    @Test("the resilient gRPC pair passes it: lost 0, duplicated 0, counts equal its logs, no undecodable bytes")
    func resilientPasses() async throws {
        let (result, folder) = try await run(naive: false)
        #expect(result.status == 0, "exit \(result.status): \(result.stdout)\n\(result.stderr)")
        let run = RunFolderUnderTest(folder: folder, result: result, listenPort: 0, upstreamPort: 0)
        let report = try run.report()
        let truth = try GroundTruthLog(folder: folder)
        #expect(report.totals.lost == 0 && report.totals.duplicated == 0)
        #expect(report.streams.count == 6, "g1…g3 each way")
        for stream in report.streams {
            #expect(stream.ok == Int64(truth.distinct(stream.key).count), "\(stream.key): audit ok vs seqs processed")
        }
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(folder.path)
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "no protocol errors: \(counts)")
        run.remove()
    }
}
