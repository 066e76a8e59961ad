import ArgumentParser
import ChaosControl
import ChaosCore
import ChaosProtocols
import ChaosProxy
import ChaosRunner
import Foundation

/// `chaos proxy`: bare proxies with no scenario, made from the command line, a Toxiproxy config file, or at
/// run time through the control API (Toxiproxy's, so Toxiproxy clients drive it unchanged).
struct Proxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run bare TCP or UDP proxies (no scenario) until Ctrl-C, driven by a Toxiproxy-compatible HTTP API.",
        discussion: """
            With --api HOST:PORT: Toxiproxy's API (GET/POST /proxies, /proxies/NAME, /proxies/NAME/toxics, \
            /proxies/NAME/toxics/TOXIC, POST /reset, POST /populate, GET /version), chaos's own faults \
            (POST /faults with one fault as a scenario writes it, DELETE /faults/ID), GET /metrics \
            (Prometheus) and, with --protocol-from SCENARIO or the protocol flags, GET /report (the live audit). --listen and --upstream make one proxy named "proxy"; --config FILE reads Toxiproxy's \
            config file (a JSON list of proxies). Toxicity draws come from --seed: the same suite, the same run.
            """
    )

    @Option(
        help: "Where clients connect (HOST:PORT, or udp://HOST:PORT for datagrams in flows); with --upstream, one proxy named \"proxy\"."
    )
    var listen: String?

    @Option(help: "Where the proxy connects for each client (HOST:PORT; udp://HOST:PORT when --listen is udp://).")
    var upstream: String?

    @Option(help: "Serve the control API here (HOST:PORT), e.g. 127.0.0.1:8474 (Toxiproxy's port).")
    var api: String?

    @Option(
        help:
            "Follow this protocol's frames (\(ProtocolRegistry.frameNames.joined(separator: " or "))) so that its faults from the API (\(ProtocolRegistry.catalog.faultKinds.joined(separator: ", "))) reach connections (all connections are then relayed by NIO)."
    )
    var frames: String?

    @Option(help: "Toxiproxy's config file: a JSON list of proxies ({name, listen, upstream, enabled}).")
    var config: String?

    @OptionGroup(title: "Live audit (GET /report on the API), with --protocol-from SCENARIO or the protocol flags")
    var protocolOptions: ProtocolOptions

    @Option(help: "With a live audit: write the run folder (report.json, report.md, …) here on exit.")
    var out: String?

    @Option(help: "The seed of every draw (toxicity, jitter, API faults).")
    var seed: UInt64 = 0

    @Option(help: "How long to run (default: until Ctrl-C).")
    var duration: String = "8760h"

    @OptionGroup var relay: RelayOptions

    @OptionGroup(title: "Control API access (a bearer token when --api is not on loopback)")
    var access: APIAccessOptions

    @OptionGroup(title: "TLS on the --listen proxy (PRODUCT.md section 9)")
    var tlsOptions: TLSOptions

    /// Whether the proxy audits live: a scenario or any protocol flag was given.
    var audits: Bool { protocolOptions.protocolFrom != nil || protocolOptions.flagsGiven }

    /// `HOST:PORT`, `tcp://HOST:PORT` or `udp://HOST:PORT`; nil when it is none of them.
    static func address(_ text: String) -> (Transport, HostPort)? {
        guard let split = Transport.split(text), let address = HostPort(parsing: split.address) else { return nil }
        return (split.transport, address)
    }

    func validate() throws {
        if let listen, Self.address(listen) == nil {
            throw ValidationError("--listen must be HOST:PORT or udp://HOST:PORT, found '\(listen)'")
        }
        if let upstream, Self.address(upstream) == nil {
            throw ValidationError("--upstream must be HOST:PORT or udp://HOST:PORT, found '\(upstream)'")
        }
        guard (listen == nil) == (upstream == nil) else { throw ValidationError("--listen and --upstream go together") }
        if let listen, let upstream, let transport = Self.address(listen)?.0, let other = Self.address(upstream)?.0 {
            guard transport == other else {
                throw ValidationError("--listen is \(transport.rawValue) but --upstream is \(other.rawValue): write udp:// on both, or on neither")
            }
            if transport == .udp, tlsOptions.given { throw ValidationError("the --tls flags are for TCP: a udp:// proxy carries no TLS") }
        }
        if tlsOptions.given, listen == nil { throw ValidationError("the --tls flags set up the --listen proxy; give --listen and --upstream") }
        guard listen != nil || api != nil || config != nil else {
            throw ValidationError("give --listen and --upstream, --config FILE, or --api HOST:PORT to make proxies at run time")
        }
        if out != nil, !audits {
            throw ValidationError("--out needs a live audit, --protocol-from SCENARIO or the protocol flags (there is nothing to report)")
        }
        if let api, HostPort(parsing: api) == nil { throw ValidationError("--api must be HOST:PORT, found '\(api)'") }
        if let frames, ProtocolRegistry.plugin(following: frames) == nil {
            throw ValidationError("--frames must be \(ProtocolRegistry.frameNames.joined(separator: " or ")), found '\(frames)'")
        }
        guard ChaosDuration(parsing: duration) != nil else { throw ValidationError("--duration must be like 90s, found '\(duration)'") }
    }

    func run() async throws {
        var specs: [ProxySpec] = []
        var disabled: Set<String> = []
        if let listen, let upstream, let listening = Self.address(listen), let upstreamAddress = Self.address(upstream)?.1 {
            specs.append(
                ProxySpec(
                    name: "proxy",
                    listen: listening.1,
                    upstream: upstreamAddress,
                    tls: listening.0 == .udp ? nil : try tlsOptions.spec(),
                    transport: listening.0
                )
            )
        }
        if let config {
            for entry in try ToxiproxyConfig.load(path: config) {
                guard !specs.contains(where: { $0.name == entry.spec.name }) else {
                    throw ChaosError(.badInput, "\(config): the name '\(entry.spec.name)' is taken by --listen's proxy")
                }
                specs.append(entry.spec)
                if !entry.enabled { disabled.insert(entry.spec.name) }
            }
        }
        let length = ChaosDuration(parsing: duration)!
        let audited = try protocolOptions.scenario()
        if let from = protocolOptions.protocolFrom, audited?.protocolSpec == nil, !protocolOptions.flagsGiven {
            throw ChaosError(.badInput, "\(from): has no protocol: section to audit with")
        }
        let scenario = Scenario(
            name: "proxy",
            duration: length,
            seed: seed,
            proxies: specs,
            pair: nil,
            protocolSpec: audits ? try protocolOptions.spec(from: audited) : nil,
            baseline: nil,
            faults: [],
            expectations: audited?.expectations ?? [],
            capture: nil,
            file: protocolOptions.protocolFrom ?? "(command line)"
        )
        var configuration = ScenarioRunner.Configuration(
            scenario: scenario,
            timeline: Timeline(scenario: scenario, seed: seed),
            replayCommand: "",
            selfPath: ExecutablePath.current
        )
        configuration.writesReports = out != nil
        configuration.out = out
        configuration.drain = .zero
        configuration.disabledProxies = disabled
        relay.apply(to: &configuration)
        configuration.controlAPI = api.flatMap(HostPort.init(parsing:))
        configuration.apiAccess = try access.access(for: configuration.controlAPI, flag: "--api")
        configuration.frames = frames.flatMap(ProtocolRegistry.plugin(following:))
        let outcome = try await ScenarioRunner(configuration: configuration, output: { Console.line($0) }).run()
        for traffic in outcome.traffic {
            Console.line(
                "\(traffic.proxy): \(traffic.connections) connections, \(traffic.upstream) bytes upstream, "
                    + "\(traffic.downstream) bytes downstream"
            )
        }
        if let line = KernelDeadPath.lossLine { Console.line(line) }
        if let folder = outcome.folder {
            Console.line("verdict: \(outcome.verdict.uppercased())")
            Console.line("report: \(folder.appendingPathComponent("report.json").path)")
            if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
        }
    }
}
