import Testing

/// `Scenarios/grpc.yaml` as a user runs it: the gRPC reference pair passes; the naive client (no resume, no
/// retransmission, no keepalive) fails, and the audit's losses are exactly the holes in its consumers' logs.
@Suite("Scenarios/grpc.yaml with the built-in gRPC pair", .serialized, .timeLimit(.minutes(3)))
struct ShippedGRPCScenarioTests {
    let scenario = ShippedPairScenario(file: "Scenarios/grpc.yaml", proxy: "grpc", transport: "grpc", streamPrefix: "g")
    let overTLS = ShippedPairScenario(file: "Scenarios/grpc-tls.yaml", proxy: "grpcs", transport: "grpc", streamPrefix: "g")

    @Test("the naive gRPC client fails it: lost > 0, exactly the seqs its consumers' logs never show")
    func naiveFails() async throws { try await scenario.naiveFails() }

    @Test("the resilient gRPC pair passes it (resets, a FIN, a GOAWAY in 25 s): lost 0, duplicated 0, counts equal its logs")
    func resilientPasses() async throws { try await scenario.resilientPasses() }

    /// The first 36 s of a phone's day (see ShippedMobileDayScenarioTests), over gRPC.
    let mobileDay = ShippedPairScenario(
        file: "Scenarios/mobile-day-grpc.yaml",
        proxy: "phone",
        transport: "grpc",
        streamPrefix: "g",
        resilientDuration: "36s",
        naiveDuration: "22s"
    )

    @Test(
        "Scenarios/mobile-day-grpc.yaml: the resilient gRPC pair passes a phone's day (a dead-WiFi handoff to a new address, NAT, loss, a reset, a tunnel): lost 0, counts equal its logs"
    )
    func mobileDayPasses() async throws { try await mobileDay.resilientPasses() }

    @Test("Scenarios/mobile-day-grpc.yaml: the naive gRPC client fails a phone's day: lost > 0, exactly its logs' holes")
    func mobileDayNaiveFails() async throws { try await mobileDay.naiveFails() }

    @Test(
        "Scenarios/grpc-tls.yaml: the pair over TLS (the server's own certificate, the client trusting chaos's CA) passes resets, a truncate, a handshake fail and a GOAWAY in 25 s: lost 0, counts equal its logs"
    )
    func resilientPassesOverTLS() async throws { try await overTLS.resilientPasses() }
}
