import Foundation

/// The rules of a pair process and of an address, the same for a scenario file, `--set` and a replayed
/// `scenario.json` (``Scenario/checkInvariants(source:)`` calls them; the YAML reader gives the same
/// rules file:line:column as it reads).
extension ProcessSpec {
    /// The placeholders a command line may hold.
    package static let placeholders = [
        "index", "listen.port", "upstream.port", "listen.host", "upstream.host", "run_dir", "seed",
        "scenario_dir",
    ]

    func checkInvariants(_ field: String, _ bad: (String) -> ChaosError) throws {
        guard !run.trimmingCharacters(in: .whitespaces).isEmpty else { throw bad("\(field).run is empty") }
        for placeholder in ScenarioReader.placeholders(in: run) where !Self.placeholders.contains(placeholder) {
            throw bad("\(field).run: unknown placeholder {\(placeholder)}")
        }
        let client = field == "pair.client"
        if let ready, !Self.isReadyCheck(ready, client: client) {
            throw bad("\(field).ready must be \(Self.readyChecks(client: client)), found '\(ready)'")
        }
        guard (1...Scenario.mostClients).contains(count) else {
            throw bad("\(field).count must be 1 to \(Scenario.mostClients), found \(count)")
        }
        try Scenario.check(stopGrace, "\(field).stop_grace", positive: false, bad)
    }

    /// A client's `ready`: the run's timeline starts once every client has a connection through a proxy.
    package static let connectedCheck = "connected"

    /// What a `ready` may say, for an error message.
    static func readyChecks(client: Bool) -> String {
        client ? "'\(connectedCheck)' or 'tcp HOST:PORT'" : "'tcp HOST:PORT'"
    }

    /// `tcp HOST:PORT`, placeholders allowed in the address; for a client also `connected`.
    static func isReadyCheck(_ text: String, client: Bool = false) -> Bool {
        if client, text == connectedCheck { return true }
        let parts = text.split(separator: " ", maxSplits: 1)
        return parts.count == 2 && parts[0] == "tcp" && HostPort(parsing: String(parts[1]).replacingPlaceholdersForCheck) != nil
    }
}

extension HostPort {
    /// Whether it is an address `HostPort(parsing:)` would give: a host of letters, digits, `.-_:` and a port 0-65535.
    var isValid: Bool {
        !host.isEmpty && host.allSatisfy({ $0.isLetter || $0.isNumber || ".-_:".contains($0) }) && (0...65535).contains(port)
    }
}

extension String {
    /// `127.0.0.1:{upstream.port}` → `127.0.0.1:1`, only to check the shape of a readiness address.
    var replacingPlaceholdersForCheck: String {
        var out = ""
        var inside = false
        for c in self {
            if c == "{" {
                inside = true
                out += "1"
            } else if c == "}" {
                inside = false
            } else if !inside {
                out.append(c)
            }
        }
        return out
    }
}
