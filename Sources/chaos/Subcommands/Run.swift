import ArgumentParser
import ChaosCore
import ChaosProxy
import ChaosRunner
import Foundation

/// `chaos run SCENARIO`: proxies, pair, fault timeline, live audit, report.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a scenario: proxies, pair, fault timeline, audit and report.",
        discussion:
            "Exit 0 when every expectation holds, 1 when one fails or the run judged too little to pass (inconclusive), 2 on bad input or when the run cannot be judged."
    )

    @OptionGroup var options: ScenarioOptions

    @Option(help: "The run folder (default: Reports/<scenario>-<UTC time>/).")
    var out: String?

    @Flag(help: "Write the proxied traffic of both legs to capture.pcap in the run folder.")
    var capture = false

    @Option(help: "Serve GET /metrics (Prometheus text) here during the run (HOST:PORT), with the control API on the same port.")
    var metrics: String?

    @Option(
        help:
            "Serve the live page here during the run (HOST:PORT; open http://HOST:PORT/ui): the control API on that port, as --metrics HOST:PORT."
    )
    var ui: String?

    @Option(
        name: .customLong("repeat"),
        help:
            "Run it N times, each with a fresh pair and the same fault timeline: a folder per run (run-001/ …) in the run folder, and summary.json / summary.md beside them (failures k/N with a 95% confidence interval). Exit 1 if any run failed."
    )
    var repeatCount: Int?

    @Flag(help: "Run it again until a run does not pass: at most --repeat times (100 without it).")
    var untilFail = false

    @OptionGroup var relay: RelayOptions

    @OptionGroup var fleet: AgentOptions

    @OptionGroup var access: APIAccessOptions

    func validate() throws {
        if let metrics, HostPort(parsing: metrics) == nil { throw ValidationError("--metrics must be HOST:PORT, found '\(metrics)'") }
        if let ui, HostPort(parsing: ui) == nil { throw ValidationError("--ui must be HOST:PORT, found '\(ui)'") }
        if let ui, let metrics, ui != metrics {
            throw ValidationError("--ui and --metrics name the control API's one port: give one, or the same HOST:PORT to both")
        }
        try fleet.check()
        if fleet.hold, metrics ?? ui == nil { throw ValidationError("--hold serves the events on the control API: add --metrics HOST:PORT") }
        if let repeatCount, !(1...100_000).contains(repeatCount) {
            throw ValidationError("--repeat must be a count from 1 to 100000, found \(repeatCount)")
        }
        if repeatCount != nil || untilFail, fleet.agent != nil || fleet.hold {
            throw ValidationError("--repeat and --until-fail run one machine's scenario again and again: not with --agent or --hold")
        }
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
        configuration.controlAPI = (metrics ?? ui).flatMap(HostPort.init(parsing:))
        configuration.apiAccess = try access.access(for: configuration.controlAPI, flag: metrics == nil && ui != nil ? "--ui" : "--metrics")
        try fleet.apply(to: &configuration)
        configuration.fleetSeed = seed
        if let agent = fleet.agent { replay += " --agent \(agent)" }
        configuration.replayCommand = replay
        if repeatCount != nil || untilFail {
            try await runRepeatedly(configuration, scenario: scenario.name, seed: seed)
        } else {
            try await RunSummary.run(configuration)
        }
    }

    /// `--repeat N` / `--until-fail`: the same configuration run after run, each in its own folder, with a summary.
    private func runRepeatedly(_ configuration: ScenarioRunner.Configuration, scenario: String, seed: UInt64) async throws {
        let planned = repeatCount ?? 100
        let base = try RunFolder(scenario: scenario, out: out).url
        var summary = RepeatSummary(scenario: scenario, seed: seed, planned: planned, untilFail: untilFail)
        for index in 1...planned {
            var each = configuration
            let folder = base.appendingPathComponent(String(format: "run-%03d", index))
            each.out = folder.path
            Console.line("repeat: run \(index) of \(planned)\(untilFail ? " (until one fails)" : "")")
            var entry = RepeatSummary.Entry(index: index, verdict: "error", reason: nil, folder: folder.path)
            var interrupted = false
            do {
                let outcome = try await RunSummary.outcome(each)
                entry.verdict = outcome.verdict
                entry.reason = outcome.verdictReason
                interrupted = outcome.interrupted
            } catch let error as ChaosError {
                // A run that could not be carried out is one result of the series, not its end.
                entry.reason = error.description
                Console.line("run \(index) could not be judged: \(error.description)")
            }
            summary.runs.append(entry)
            try summary.write(to: base)
            if interrupted || (untilFail && entry.verdict != "pass") { break }
        }
        Console.line("repeat: \(summary.headline)")
        Console.line("summary: \(base.appendingPathComponent("summary.md").path)")
        if summary.exitCode != 0 { throw ExitCode(summary.exitCode) }
    }
}

/// Runs a configuration and prints what a user wants to know at the end; exits with the verdict's code.
enum RunSummary {
    static func run(_ configuration: ScenarioRunner.Configuration) async throws {
        let outcome = try await outcome(configuration)
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }

    /// Runs a configuration and prints the summary lines; the outcome says the verdict.
    static func outcome(_ configuration: ScenarioRunner.Configuration) async throws -> ScenarioRunner.Outcome {
        let outcome = try await ScenarioRunner(configuration: configuration, output: { Console.line($0) }).run()
        Console.line(outcome.interrupted ? "stopped by signal" : "finished")
        Console.line("faults applied: \(outcome.applied.count) of \(configuration.timeline.count())")
        for traffic in outcome.traffic {
            Console.line(
                "proxy \(traffic.proxy): \(traffic.connections) connections (\(traffic.cut) cut by faults), "
                    + "\(traffic.upstream) bytes upstream, \(traffic.downstream) bytes downstream"
            )
        }
        if let line = KernelDeadPath.lossLine { Console.line(line) }
        if let folder = outcome.folder {
            Console.line("verdict: \(outcome.verdict.uppercased())" + (outcome.verdictReason.map { " (\($0))" } ?? ""))
            Console.line("report: \(folder.appendingPathComponent("report.md").path)")
            Console.line("        (chaos report \(folder.path) --format markdown|github|json|junit|html)")
        }
        return outcome
    }
}

/// The path of this executable, so that pair commands starting with `chaos` run this very build.
enum ExecutablePath {
    static var current: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
    }
}
