import ArgumentParser
import ChaosCore

/// `chaos validate SCENARIO`: parse and check a scenario, print its fault timeline for the seed.
struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a scenario and print its fault timeline for a seed.",
        discussion: "Errors name file:line:column and exit with code 2."
    )

    @OptionGroup var options: ScenarioOptions

    func run() async throws {
        let (scenario, seed, drawn) = try options.load()
        let timeline = Timeline(scenario: scenario, seed: seed)
        print("scenario \(scenario.name) (\(scenario.file)) is valid")
        print("duration \(scenario.duration), seed \(seed)\(drawn ? " (drawn; pass --seed \(seed) to repeat)" : "")")
        for proxy in scenario.proxies {
            print("proxy \(proxy.name): listen \(proxy.listen) -> upstream \(proxy.upstream)")
        }
        if let baseline = scenario.baseline { print("baseline link: \(baseline)") }
        let kinds = Set(timeline.occurrences.map(\.kind.rawValue)).sorted()
        print("timeline: \(timeline.occurrences.count) fault occurrences (\(kinds.joined(separator: ", ")))")
        for line in timeline.lines { print("  " + line) }
    }
}
