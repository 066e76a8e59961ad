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
}
