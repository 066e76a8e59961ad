import Foundation
import Testing

/// A QUIC pair on PyPI's aioquic (Tests/Fixtures/pairs/quic_pair.py: newline JSON on a bidirectional stream each way,
/// the clients writing their key log) through a `udp://` proxy of `chaos run` with `protocol: {transport: quic}`:
/// loss, jitter, a partition and a NAT rebinding, which QUIC's retransmission and path migration survive. The audit
/// opens every packet with the key log as the run goes, and its ok per stream equals what each end logged reading.
@Suite("QUIC pair (aioquic): the live audit of QUIC streams equals the ends' logs", .serialized, .timeLimit(.minutes(3)))
struct QUICPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/quic_pair.py").path

    static func scenario(listen: Int, upstream: Int, keys: String) -> String {
        """
        name: quic-pair
        duration: 15s
        seed: 4
        proxies:
          - {name: quic, listen: "udp://127.0.0.1:\(listen)", upstream: "udp://127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --dir {run_dir}/server --log {run_dir}/server.jsonl --keylog \(keys)
            stop_grace: 1s
          client:
            run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --ca {run_dir}/server/ca.pem --log {run_dir}/client-{index}.jsonl --keylog \(keys) --name c{index} --messages 400 --interval 0.02 --timeout 30 --stay
            count: 2
            ready: connected
            stop_grace: 1s
        protocol:
          transport: quic
          keylog: \(keys)
          framing: lines
        faults:
          - loss: {at: 1s, for: 2s, rate: 5%}
          - latency: {at: 3s, for: 1500ms, add: 20ms, jitter: 15ms}
          - partition: {at: 5s, for: 1s}
          - rebind: {at: 7s}
        expect:
          lost: 0
          messages: 1500
        """
    }

    @Test("loss, jitter, a partition and a rebinding: every stream's ok equals the logs, nothing lost, every packet opened")
    func auditEqualsLogs() async throws {
        let keys = FileManager.default.temporaryDirectory.appendingPathComponent("quic-keys-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: keys) }
        let run = try await ThirdPartyPairRun.run("quic-pair", capture: false) { Self.scenario(listen: $0, upstream: $1, keys: keys) }
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, _, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0)
        let extra = json["extra"] as? [String: Any] ?? [:]
        #expect(Int(extra["proxy.quic.datagrams_dropped.loss"] as? String ?? "") ?? 0 > 0, "the loss dropped packets: \(extra)")
        #expect(Int(extra["proxy.quic.datagrams_dropped.dead-path"] as? String ?? "") ?? 0 > 0, "the partition dropped packets")
        #expect(Int(extra["proxy.quic.flows_rebound"] as? String ?? "") ?? 0 > 0, "the rebinding moved the flows: \(extra)")
        #expect(extra["quic.packets_unopened"] as? String == "0", "every packet opened: \(extra)")
    }
}
