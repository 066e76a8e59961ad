import ArgumentParser
import ChaosCore
import ChaosRunner
import Foundation

/// `chaos run SCENARIO`: proxies, pair, fault timeline, live audit, report.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a scenario: proxies, pair, fault timeline, audit and report.",
        discussion: "Exit 0 when every expectation holds, 1 when one fails, 2 on bad input or when the run cannot be judged."
    )

    @OptionGroup var options: ScenarioOptions

    @Option(help: "The run folder (default: Reports/<scenario>-<UTC time>/).")
    var out: String?

    @Flag(help: "Write the proxied traffic of both legs to capture.pcap in the run folder.")
    var capture = false

    @Option(help: "Serve GET /metrics (Prometheus text) here during the run (HOST:PORT), with the control API on the same port.")
    var metrics: String?

    @OptionGroup var relay: RelayOptions

    @OptionGroup var fleet: AgentOptions

    @OptionGroup var access: APIAccessOptions

    func validate() throws {
        if let metrics, HostPort(parsing: metrics) == nil { throw ValidationError("--metrics must be HOST:PORT, found '\(metrics)'") }
        try fleet.check()
        if fleet.hold, metrics == nil { throw ValidationError("--hold serves the events on the control API: add --metrics HOST:PORT") }
    }

    func run() async throws {
        let (scenario, seed, drawn) = try options.load()
        if drawn { Console.line("seed \(seed) (drawn; pass --seed \(seed) to repeat this run)") }
        var replay = "chaos run \(options.scenario) --seed \(seed)"
        if let duration = options.duration { replay += " --duration \(duration)" }
        for setting in options.settings { replay += " --set \(setting)" }
        if capture { replay += " --capture" }
        var configuration = ScenarioRunner.Configuration(
            scenario: scenario,
            timeline: Timeline(scenario: scenario, seed: fleet.timelineSeed(seed, scenario: scenario)),
            out: out,
            replayCommand: replay,
            selfPath: ExecutablePath.current
        )
        if capture { configuration.capture = true }
        relay.apply(to: &configuration)
        configuration.controlAPI = metrics.flatMap(HostPort.init(parsing:))
        configuration.apiAccess = try access.access(for: configuration.controlAPI, flag: "--metrics")
        try fleet.apply(to: &configuration)
        configuration.fleetSeed = seed
        if let agent = fleet.agent { replay += " --agent \(agent)" }
        configuration.replayCommand = replay
        try await RunSummary.run(configuration)
    }
}

/// Runs a configuration and prints what a user wants to know at the end; exits with the verdict's code.
enum RunSummary {
    static func run(_ configuration: ScenarioRunner.Configuration) async throws {
        let outcome = try await ScenarioRunner(configuration: configuration, output: { Console.line($0) }).run()
        Console.line(outcome.interrupted ? "stopped by signal" : "finished")
        Console.line("faults applied: \(outcome.applied.count) of \(configuration.timeline.count())")
        for traffic in outcome.traffic {
            Console.line(
                "proxy \(traffic.proxy): \(traffic.connections) connections (\(traffic.cut) cut by faults), "
                    + "\(traffic.upstream) bytes upstream, \(traffic.downstream) bytes downstream"
            )
        }
        if let folder = outcome.folder {
            Console.line("verdict: \(outcome.verdict.uppercased())" + (outcome.verdictReason.map { " (\($0))" } ?? ""))
            Console.line("report: \(folder.appendingPathComponent("report.md").path)")
            Console.line("        (chaos report \(folder.path) --format markdown|github|json|junit|html)")
        }
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }
}

/// The path of this executable, so that pair commands starting with `chaos` run this very build.
enum ExecutablePath {
    static var current: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
    }
}
