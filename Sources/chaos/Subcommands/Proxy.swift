import ArgumentParser
import ChaosCore
import ChaosRunner

/// `chaos proxy --listen A --upstream B`: a bare proxy with no scenario.
struct Proxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a bare TCP proxy (no scenario) until Ctrl-C, optionally driven by an HTTP control API.",
        discussion: """
        With --api: GET /proxies, GET /faults, POST /faults with one fault as a scenario writes it \
        ({"latency": {"add": "100ms", "direction": "downstream"}}), DELETE /faults/ID, DELETE /faults.
        """
    )

    @Option(help: "Where clients connect (HOST:PORT).")
    var listen: String

    @Option(help: "Where the proxy connects for each client (HOST:PORT).")
    var upstream: String

    @Option(help: "Serve the HTTP control API here (HOST:PORT), e.g. 127.0.0.1:8474.")
    var api: String?

    @Option(help: "Follow this protocol's frames (websocket or http2) so that ws-close and goaway faults from the API reach connections (all connections are then relayed by NIO).")
    var frames: String?

    @Option(help: "How long to run (default: until Ctrl-C).")
    var duration: String = "8760h"

    @OptionGroup var relay: RelayOptions

    func validate() throws {
        guard HostPort(parsing: listen) != nil else { throw ValidationError("--listen must be HOST:PORT, found '\(listen)'") }
        guard HostPort(parsing: upstream) != nil else { throw ValidationError("--upstream must be HOST:PORT, found '\(upstream)'") }
        if let api, HostPort(parsing: api) == nil { throw ValidationError("--api must be HOST:PORT, found '\(api)'") }
        if let frames, FrameProtocol(rawValue: frames) == nil {
            throw ValidationError("--frames must be websocket or http2, found '\(frames)'")
        }
        guard ChaosDuration(parsing: duration) != nil else { throw ValidationError("--duration must be like 90s, found '\(duration)'") }
    }

    func run() async throws {
        let spec = ProxySpec(name: "proxy", listen: HostPort(parsing: listen)!, upstream: HostPort(parsing: upstream)!)
        let length = ChaosDuration(parsing: duration)!
        let scenario = Scenario(name: "proxy", duration: length, seed: 0, proxies: [spec], pair: nil, protocolSpec: nil,
                                baseline: nil, faults: [], expectations: [], capture: nil, file: "(command line)")
        var configuration = ScenarioRunner.Configuration(
            scenario: scenario, timeline: Timeline(scenario: scenario, seed: 0), replayCommand: "",
            selfPath: ExecutablePath.current)
        configuration.writesReports = false
        configuration.drain = .zero
        relay.apply(to: &configuration)
        configuration.controlAPI = api.flatMap(HostPort.init(parsing:))
        configuration.frames = frames.flatMap(FrameProtocol.init(rawValue:))
        let outcome = try await ScenarioRunner(configuration: configuration, output: { Console.line($0) }).run()
        for traffic in outcome.traffic {
            Console.line("\(traffic.connections) connections, \(traffic.upstream) bytes upstream, \(traffic.downstream) bytes downstream")
        }
    }
}
