import ChaosControl
import ChaosCore
import ChaosProxy
import ServiceLifecycle

/// The scenario's proxies, started before the group runs (so that the pair has somewhere to connect):
/// they relay until the run shuts down, and stop last but for the event loops.
struct ProxiesService: Service {
    let proxies: [ProxyServer]

    func run() async throws {
        try? await gracefulShutdown()
        await uncancelled { [proxies] in
            for proxy in proxies { await proxy.stop() }
        }
    }
}

/// The HTTP control API (`chaos proxy --api`, `chaos run --metrics`): serves from the start of the run to its
/// shutdown, then lifts its faults and toxics and stops the proxies it made.
struct ControlAPIService: Service {
    let api: ControlAPI
    let address: HostPort
    let output: @Sendable (String) -> Void

    func run() async throws {
        let bound = try await api.start(host: address.host, port: address.port)
        output("control API: http://\(bound)")
        if api.servesLivePage { output("live page: http://\(bound)/ui") }
        try? await gracefulShutdown()
        await uncancelled { [api] in await api.stop() }
    }
}
