import ArgumentParser
import ChaosCore
import ChaosRunner

/// `chaos replay DIR`: re-run the exact fault timeline of an earlier run.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-run the exact fault timeline (same seed, same schedule) of an earlier run folder."
    )

    @Argument(help: "The earlier run's folder (it holds scenario.json and timeline.json).")
    var directory: String

    @Option(help: "The new run folder (default: Reports/<scenario>-<UTC time>/).")
    var out: String?

    @OptionGroup var relay: RelayOptions

    func run() async throws {
        let (scenario, timeline) = try RunFolder.loadReplayInputs(from: directory)
        Console.line("replaying \(scenario.name) from \(directory): seed \(timeline.seed), \(timeline.count())")
        var configuration = ScenarioRunner.Configuration(
            scenario: scenario,
            timeline: timeline,
            out: out,
            replayCommand: "chaos replay \(directory)",
            selfPath: ExecutablePath.current
        )
        relay.apply(to: &configuration)
        try await RunSummary.run(configuration)
    }
}
