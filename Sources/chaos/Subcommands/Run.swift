import ArgumentParser
import ChaosCore
import ChaosRunner

/// `chaos run SCENARIO`: run the proxies and the fault timeline for the scenario's duration.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a scenario: proxies, fault timeline, audit and report.",
        discussion: "Exit 0 when every expectation holds, 1 when one fails, 2 on bad input."
    )

    @OptionGroup var options: ScenarioOptions

    func run() async throws {
        let (scenario, seed, drawn) = try options.load()
        if drawn { print("seed \(seed) (drawn; pass --seed \(seed) to repeat this run)") }
        let timeline = Timeline(scenario: scenario, seed: seed)
        let outcome = try await ScenarioRunner(scenario: scenario, timeline: timeline).run()
        print(outcome.interrupted ? "stopped by signal" : "finished")
        print("faults applied: \(outcome.applied.count) of \(timeline.occurrences.count)")
        for traffic in outcome.traffic {
            print("proxy \(traffic.proxy): \(traffic.connections) connections (\(traffic.cut) cut by faults), "
                + "\(traffic.upstream) bytes upstream, \(traffic.downstream) bytes downstream")
        }
    }
}
