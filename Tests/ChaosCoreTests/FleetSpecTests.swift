import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

/// `fleet: {schedule: …}`: shared by default; `per-agent` draws each agent's timeline from (seed, name), the same on
/// every host for the same name, different between names.
@Suite("fleet: schedule")
struct FleetSpecTests {
    static let text = """
        name: fleet
        duration: 60s
        seed: 7
        proxies:
          - {name: stream, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
        faults:
          - disconnect: {every: 2s..9s, mode: reset}
        """

    @Test("absent: no fleet spec (shared); per-agent and shared parse; the spec survives scenario.json")
    func parses() throws {
        #expect(try Scenario.parse(yaml: Self.text, file: "f.yaml").fleet == nil)
        for schedule in FleetSpec.Schedule.allCases {
            let scenario = try Scenario.parse(yaml: Self.text + "\nfleet: {schedule: \(schedule.rawValue)}\n", file: "f.yaml")
            #expect(scenario.fleet?.schedule == schedule)
            let decoded = try JSONDecoder().decode(Scenario.self, from: try JSONEncoder().encode(scenario))
            #expect(decoded.fleet == scenario.fleet)
        }
    }

    @Test("an agent's seed is a pure function of (seed, name): equal for equal inputs, apart for different names or seeds")
    func agentSeeds() throws {
        let scenario = try Scenario.parse(yaml: Self.text, file: "f.yaml")
        #expect(FleetSpec.agentSeed(7, agent: "edge-1") == FleetSpec.agentSeed(7, agent: "edge-1"))
        let seeds = Set(["edge-1", "edge-2", "edge-3", "a", "b"].map { FleetSpec.agentSeed(7, agent: $0) })
        #expect(seeds.count == 5)
        #expect(FleetSpec.agentSeed(7, agent: "a") != FleetSpec.agentSeed(8, agent: "a"))
        let one = Array(Timeline(scenario: scenario, seed: FleetSpec.agentSeed(7, agent: "a")).prefix(5)).map(\.at)
        let other = Array(Timeline(scenario: scenario, seed: FleetSpec.agentSeed(7, agent: "b")).prefix(5)).map(\.at)
        #expect(one != other, "\(one) vs \(other)")
    }
}
