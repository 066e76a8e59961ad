import Testing

/// `Scenarios/mobile-day.yaml` and its WebSocket twin as a user runs them: a phone's day (a handoff with a dead WiFi
/// and a new address, LTE with its radio behind a carrier NAT with loss, a tunnel, slow 3G, back to WiFi). The
/// resilient pair passes with counts equal to its logs and a report with no thundering herd and no half-open it should
/// have noticed; the naive client fails with its logs' holes as lost, and its report flags one of them. The gRPC
/// twin runs with the gRPC suites (ShippedGRPCScenarioTests).
///
/// The naive runs last through the tunnel (a 5 s partition at 26 s): a client with no heartbeat never notices it,
/// whatever the machine's load, and their server waits 60 s for a silent client (its own 6 s could notice the tunnel
/// for the client when a loaded machine delays the client's first bytes after it). Ended after the first handoff, a
/// run's only finding could be the thundering herd of its reconnects, which a loaded machine spread past the 50 ms
/// window in one fresh-clone run over lines, and in one over WebSocket (s55q2: its 22 s run's report had no finding
/// but 2 unconfirmed seqs).
@Suite("Scenarios/mobile-day.yaml over lines and WebSocket", .serialized)
struct ShippedMobileDayScenarioTests {
    /// The whole day over lines (both handoffs); its first 36 s over WebSocket (the dead-WiFi handoff to a new
    /// address, the NAT, loss, a reset, the tunnel, the start of slow 3G). Both naive runs end after the tunnel.
    static let lines = ShippedPairScenario(
        file: "Scenarios/mobile-day.yaml",
        proxy: "phone",
        transport: "lines",
        streamPrefix: "d",
        resilientDuration: "60s",
        naiveDuration: "33s",
        judgesFindings: true,
        opensReportInBrowser: true,
        naiveServerIdleTimeout: "60s"
    )
    static let websocket = ShippedPairScenario(
        file: "Scenarios/mobile-day-websocket.yaml",
        proxy: "phone",
        transport: "websocket",
        streamPrefix: "w",
        resilientDuration: "36s",
        naiveDuration: "33s",
        judgesFindings: true,
        naiveServerIdleTimeout: "60s"
    )

    @Test("the resilient pair passes a phone's day over lines: lost 0, duplicated 0, counts equal its logs")
    func linesPass() async throws { try await Self.lines.resilientPasses() }

    @Test("the naive client fails a phone's day over lines: lost > 0, exactly its logs' holes")
    func linesNaiveFails() async throws { try await Self.lines.naiveFails() }

    @Test("the resilient pair passes a phone's day over WebSocket: lost 0, duplicated 0, counts equal its logs")
    func websocketPasses() async throws { try await Self.websocket.resilientPasses() }

    @Test("the naive client fails a phone's day over WebSocket: lost > 0, exactly its logs' holes")
    func websocketNaiveFails() async throws { try await Self.websocket.naiveFails() }
}
