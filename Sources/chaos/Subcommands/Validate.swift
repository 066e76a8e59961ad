import ArgumentParser
import ChaosCore

/// `chaos validate SCENARIO`: parse and check a scenario, print its fault timeline for the seed.
struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a scenario and print its fault timeline for a seed.",
        discussion: "Errors name file:line:column and exit with code 2."
    )

    @OptionGroup var options: ScenarioOptions

    @Option(help: "How many fault occurrences to print (the timeline is drawn lazily; its count is given whole).")
    var show = 200

    func run() async throws {
        let (scenario, seed, drawn) = try options.load()
        let timeline = Timeline(scenario: scenario, seed: seed)
        print("scenario \(scenario.name) (\(scenario.file)) is valid")
        print("duration \(scenario.duration), seed \(seed)\(drawn ? " (drawn; pass --seed \(seed) to repeat)" : "")")
        for proxy in scenario.proxies {
            print("proxy \(proxy.name): listen \(proxy.listenText) -> upstream \(proxy.upstreamText)")
        }
        if let baseline = scenario.baseline { print("baseline link: \(baseline)") }
        let count = timeline.count()
        let kinds = Set(scenario.faults.map(\.kind.rawValue)).sorted()
        print("timeline: \(count) (\(kinds.joined(separator: ", ")))")
        if count.exact == nil {
            for formula in count.formulas { print("  " + formula) }
        }
        let shown = timeline.lines(first: max(0, show))
        for line in shown { print("  " + line) }
        if count.exact.map({ $0 > shown.count }) ?? true {
            print("  … the first \(shown.count) shown (--show N for more)")
        }
    }
}
