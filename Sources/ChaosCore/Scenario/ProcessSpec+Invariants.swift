import Foundation

/// The rules of a pair process and of an address, the same for a scenario file, `--set` and a replayed
/// `scenario.json` (``Scenario/checkInvariants(source:)`` calls them; the YAML reader gives the same
/// rules file:line:column as it reads).
extension ProcessSpec {
    /// The placeholders a command line may hold.
    public static let placeholders = [
        "index", "listen.port", "upstream.port", "listen.host", "upstream.host", "run_dir", "seed",
        "scenario_dir",
    ]

    func checkInvariants(_ field: String, _ bad: (String) -> ChaosError) throws {
        guard !run.trimmingCharacters(in: .whitespaces).isEmpty else { throw bad("\(field).run is empty") }
        for placeholder in ScenarioReader.placeholders(in: run) where !Self.placeholders.contains(placeholder) {
            throw bad("\(field).run: unknown placeholder {\(placeholder)}")
        }
        if let ready, !Self.isReadyCheck(ready) { throw bad("\(field).ready must be 'tcp HOST:PORT', found '\(ready)'") }
        guard (1...Scenario.mostClients).contains(count) else {
            throw bad("\(field).count must be 1 to \(Scenario.mostClients), found \(count)")
        }
        try Scenario.check(stopGrace, "\(field).stop_grace", positive: false, bad)
    }

    /// `tcp HOST:PORT`, placeholders allowed in the address.
    static func isReadyCheck(_ text: String) -> Bool {
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
