import ArgumentParser
import ChaosCore
import ChaosRunner
import Foundation

/// `chaos run`'s fleet flags: this run as one agent of several (PRODUCT.md section 12).
struct AgentOptions: ParsableArguments {
    @Option(help: "Run as agent NAME of a fleet: write the traffic events to events.bin in the run folder for chaos report --merge.")
    var agent: String?

    @Option(name: .customLong("start-at"), help: "Start the run's clock at this RFC 3339 moment (every agent of a fleet the same), waiting for it.")
    var startAt: String?

    @Option(name: .customLong("event-ring"), help: "The most bytes the agent's events.bin ring keeps (default 4GB; at least 1MB).")
    var eventRing: String?

    @Flag(
        help: "Once the run is over, keep serving its events and report on the control API (--metrics) until SIGTERM, for chaos report --merge URL."
    )
    var hold = false

    @Option(
        name: .customLong("peer"),
        help: "Another agent of the fleet, by its control API (http://HOST:PORT), which this agent's live page links to (repeatable)."
    )
    var peers: [String] = []

    /// The agent's name, checked: letters, digits, `.`, `_` and `-`, at most 63 (a Kubernetes pod name fits).
    func check() throws {
        if let agent {
            guard (1...63).contains(agent.count), agent.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                throw ValidationError("--agent must be 1 to 63 letters, digits, '.', '_' or '-', found '\(agent)'")
            }
        }
        if let startAt, Self.date(startAt) == nil {
            throw ValidationError("--start-at must be an RFC 3339 time such as 2026-11-27T12:00:00Z, found '\(startAt)'")
        }
        if startAt != nil || eventRing != nil || hold || !peers.isEmpty, agent == nil {
            throw ValidationError("--start-at, --event-ring, --hold and --peer belong to a fleet's agent: add --agent NAME")
        }
        for peer in peers
        where !peer.hasPrefix("http://") && !peer.hasPrefix("https://") || peer.contains(where: { $0 == "\"" || $0 == "<" || $0.isWhitespace }) {
            throw ValidationError("--peer must be an agent's control API URL such as http://agent-2:9090, found '\(peer)'")
        }
        if let eventRing {
            guard let bytes = Self.bytes(eventRing), bytes >= 1 << 20 else {
                throw ValidationError("--event-ring must be a size of at least 1MB (such as 512MB or 4GB), found '\(eventRing)'")
            }
        }
    }

    func apply(to configuration: inout ScenarioRunner.Configuration) throws {
        configuration.agent = agent
        configuration.startAt = startAt.flatMap(Self.date)
        if let bytes = eventRing.flatMap(Self.bytes) { configuration.eventRingBytes = bytes }
        configuration.hold = hold
        configuration.fleetPeers = peers
    }

    /// The seed of this run's timeline: the scenario's, or under `fleet: {schedule: per-agent}` the agent's own.
    func timelineSeed(_ seed: UInt64, scenario: Scenario) -> UInt64 {
        guard let agent, scenario.fleet?.schedule == .perAgent else { return seed }
        return FleetSpec.agentSeed(seed, agent: agent)
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// `512MB`, `4GB`, `1048576`: bytes (powers of 1,024).
    static func bytes(_ text: String) -> Int? {
        let units: [(String, Int)] = [("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("", 1)]
        for (suffix, scale) in units where text.uppercased().hasSuffix(suffix) {
            guard let value = Int(text.dropLast(suffix.count)), value >= 0 else { continue }
            let (bytes, overflow) = value.multipliedReportingOverflow(by: scale)
            return overflow ? nil : bytes
        }
        return nil
    }
}
