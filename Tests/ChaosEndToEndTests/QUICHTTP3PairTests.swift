import Foundation
import Testing

/// The aioquic pair of ``QUICPairTests`` over HTTP/3 (`quic_pair.py --http3`: aioquic's H3Connection, ALPN h3), through
/// a `udp://` proxy of `chaos run` with `protocol: {transport: quic, framing: http3}`: each client's stream is a request
/// (POST /lines?stream=NAME) whose NDJSON body it streams, answered by a response whose body the server streams back,
/// and the audit names each stream by its request's `:path`.
@Suite("QUIC pair over HTTP/3 (aioquic): the audit of request and response bodies equals the ends' logs", .serialized, .timeLimit(.minutes(3)))
struct QUICHTTP3PairTests {
    static let scenario = QUICPairRun.Scenario(
        name: "quic-http3-pair",
        duration: "10s",
        seed: 9,
        proxy: "h3",
        server: "--http3",
        client: "--http3 --messages 300 --interval 0.02",
        protocolLines: ["framing: http3", "stream: query:stream"],
        faults: ["loss: {at: 1s, for: 2s, rate: 5%}", "partition: {at: 4s, for: 1s}", "rebind: {at: 5500ms}"],
        expect: ["lost: 0", "messages: 1100"]
    )

    @Test(
        "HTTP/3 requests through loss, a partition and a rebinding: each request's stream named by its :path, every body line's ok equals the logs, requests and statuses counted"
    )
    func http3AuditEqualsLogs() async throws {
        let run = try await QUICPairRun.run(Self.scenario)
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let events = try #require(json["protocol_events"] as? [String: Any])
        #expect(events["h3_requests"] as? Int == 2, "a request per client: \(events)")
        #expect((events["h3_statuses"] as? [String: Int]) == ["200": 2], "each answered 200: \(events)")
        let server = try String(contentsOfFile: "\(run.folder)/server.jsonl", encoding: .utf8)
        #expect(server.contains("\"request\": \"/lines?stream=c1\"") && server.contains("\"request\": \"/lines?stream=c2\""))
        let extra = json["extra"] as? [String: Any] ?? [:]
        #expect(Int(extra["proxy.h3.datagrams_dropped.loss"] as? String ?? "") ?? 0 > 0, "the loss dropped packets: \(extra)")
        #expect(extra["quic.packets_unopened"] as? String == "0", "every packet opened: \(extra)")
    }
}
