import ArgumentParser
import ChaosCore
import ChaosProtocols
import ChaosRunner

/// The scenario file and the flags that change it, shared by `run` and `validate`.
struct ScenarioOptions: ParsableArguments {
    @Argument(help: "The scenario file (YAML).")
    var scenario: String

    @Option(help: "The seed for every random choice (default: the scenario's, or a new one that is printed).")
    var seed: UInt64?

    @Option(help: "How long to run (250ms, 90s, 10m, 72h); overrides the scenario's duration.")
    var duration: String?

    @Option(name: .customLong("set"), help: "Override a scenario value: key=value (repeatable).")
    var settings: [String] = []

    /// Loads, overrides and checks the scenario; returns it with the seed to use.
    func load() throws -> (Scenario, UInt64, seedWasDrawn: Bool) {
        let loaded = try Scenario.load(path: scenario)
        let overridden = try ScenarioOverrides(seed: seed, duration: duration, settings: settings).apply(to: loaded)
        if !settings.isEmpty || duration != nil {
            try overridden.checkInvariants(source: "\(scenario) with --set/--duration")
        }
        if let seed = overridden.seed { return (overridden, seed, false) }
        // The only system randomness in chaos: picking a seed when none is given. It is printed
        // and recorded so the run can be reproduced.
        return (overridden, UInt64.random(in: 1...999_999_999), true)
    }
}
