import Testing

/// `Scenarios/websocket.yaml` as a user runs it: the WebSocket reference pair passes; the naive client (no resume,
/// no retransmission, no heartbeat) fails, and the audit's losses are exactly the holes in its consumers' logs.
@Suite("Scenarios/websocket.yaml with the built-in WebSocket pair", .serialized)
struct ShippedWebSocketScenarioTests {
    let scenario = ShippedPairScenario(file: "Scenarios/websocket.yaml", proxy: "ws", transport: "websocket", streamPrefix: "w")

    @Test("the naive WebSocket client fails it: lost > 0, exactly the seqs its consumers' logs never show")
    func naiveFails() async throws { try await scenario.naiveFails() }

    @Test("the resilient WebSocket pair passes it: lost 0, duplicated 0, counts equal its logs")
    func resilientPasses() async throws { try await scenario.resilientPasses() }

    /// 46 s reach past the partition (28-34 s), which ends as the server's idle timeout closes its TLS session
    /// (close_notify) while the client's held messages are being written to it, past the close and the stalled
    /// handshakes at 36 s and the ws-close at 40 s, with time after them for a client whose retries met one fault after
    /// another to come back (at 38 s, a client cut at 36 s by the close was still waiting out its backoff when the run
    /// ended: two fresh-clone runs), and the stop, when each client closes its session first and still reads the
    /// server's last messages. Run from outside the checkout: the server's certificate is found through `{scenario_dir}`.
    @Test(
        "Scenarios/websocket-tls.yaml, run from another folder: the pair over wss passes resets, a truncate, a handshake fail, a partition, a stall and a ws-close in 46 s: lost 0, no tls anomaly, counts equal its logs"
    )
    func resilientPassesOverTLS() async throws {
        try await ShippedPairScenario(
            file: "Scenarios/websocket-tls.yaml",
            proxy: "wss",
            transport: "websocket",
            streamPrefix: "w",
            resilientDuration: "46s",
            fromElsewhere: true
        ).resilientPasses()
    }
}
