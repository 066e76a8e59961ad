package import ChaosCore

/// Applies `--seed`, `--duration` and `--set key=value` to a loaded scenario.
package struct ScenarioOverrides: Sendable {
    /// `--seed`.
    package var seed: UInt64?
    /// `--duration`.
    package var duration: String?
    /// `--set key=value`, in order.
    package var settings: [String]

    /// Creates overrides.
    package init(seed: UInt64? = nil, duration: String? = nil, settings: [String] = []) {
        self.seed = seed
        self.duration = duration
        self.settings = settings
    }

    /// The keys `--set` accepts.
    package static let keys = [
        "name", "duration", "seed", "proxies.NAME.listen", "proxies.NAME.upstream", "proxies.NAME.tls", "pair.client.count",
        "pair.client.run", "pair.server.run", "capture",
    ]

    /// The scenario with the overrides applied; a bad value is a `badInput` error.
    package func apply(to original: Scenario) throws -> Scenario {
        var scenario = original
        for setting in settings {
            guard let equals = setting.firstIndex(of: "=") else {
                throw ChaosError.badInput("--set '\(setting)' must be key=value; keys: \(Self.keys.joined(separator: ", "))")
            }
            let key = String(setting[..<equals])
            let value = String(setting[setting.index(after: equals)...])
            try set(key, value, in: &scenario)
        }
        if let duration {
            guard let value = ChaosDuration(parsing: duration), value.nanoseconds > 0 else {
                throw ChaosError.badInput("--duration must be a duration like 90s, 10m or 72h, found '\(duration)'")
            }
            scenario.duration = value
        }
        if let seed { scenario.seed = seed }
        return scenario
    }

    private func set(_ key: String, _ value: String, in scenario: inout Scenario) throws {
        let parts = key.split(separator: ".").map(String.init)
        func bad(_ expected: String) -> ChaosError { .badInput("--set \(key): expected \(expected), found '\(value)'") }
        switch parts.count {
        case 1 where key == "name":
            guard Scenario.isValidName(value) else { throw bad("a name of letters, digits, '-', '_' or '.'") }
            scenario.name = value
        case 1 where key == "duration":
            guard let d = ChaosDuration(parsing: value), d.nanoseconds > 0 else { throw bad("a duration like 90s") }
            scenario.duration = d
        case 1 where key == "seed":
            guard let s = UInt64(value) else { throw bad("a whole number") }
            scenario.seed = s
        case 1 where key == "capture":
            guard let on = ["true": true, "false": false, "on": true, "off": false][value] else { throw bad("true or false") }
            scenario.capture = CaptureSpec(enabled: on, ringBytes: scenario.capture?.ringBytes)
        case 3 where parts[0] == "proxies" && ["listen", "upstream", "tls"].contains(parts[2]):
            guard let index = scenario.proxies.firstIndex(where: { $0.name == parts[1] }) else {
                throw ChaosError.badInput(
                    "--set \(key): no proxy named '\(parts[1])'; proxies: "
                        + scenario.proxies.map(\.name).joined(separator: ", ")
                )
            }
            if parts[2] == "tls" {
                // `off` makes the proxy cleartext; anything else is a tls block as a scenario writes it.
                scenario.proxies[index].tls = value == "off" ? nil : try TLSSpec.parse(value, source: "--set \(key)")
                return
            }
            guard let address = HostPort(parsing: value) else { throw bad("an address like 127.0.0.1:7000") }
            if parts[2] == "listen" { scenario.proxies[index].listen = address } else { scenario.proxies[index].upstream = address }
        case 3 where parts[0] == "pair" && (parts[1] == "client" || parts[1] == "server"):
            var process =
                (parts[1] == "client" ? scenario.pair?.client : scenario.pair?.server)
                ?? ProcessSpec(run: "", ready: nil, count: 1, stopGrace: .seconds(Int64(5)))
            switch parts[2] {
            case "count":
                guard let n = Int(value), (1...10_000).contains(n) else { throw bad("a count from 1 to 10000") }
                process.count = n
            case "run":
                guard !value.isEmpty else { throw bad("a command") }
                process.run = value
            default:
                throw ChaosError.badInput("--set: unknown key '\(key)'; keys: \(Self.keys.joined(separator: ", "))")
            }
            var pair = scenario.pair ?? PairSpec(server: nil, client: nil)
            if parts[1] == "client" { pair.client = process } else { pair.server = process }
            scenario.pair = pair
        default:
            throw ChaosError.badInput("--set: unknown key '\(key)'; keys: \(Self.keys.joined(separator: ", "))")
        }
    }
}
