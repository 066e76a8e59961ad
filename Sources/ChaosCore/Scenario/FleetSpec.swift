/// `fleet:`: how the agents of a fleet (`chaos run --agent NAME`, PRODUCT.md section 12) share the timeline.
package struct FleetSpec: Sendable, Codable, Equatable {
    /// Whose timeline each agent applies.
    package enum Schedule: String, Sendable, Codable, CaseIterable {
        /// Every agent the same timeline at the same moments (a cell tower failing for everyone): the default.
        case shared
        /// Each agent its own, drawn from the seed and its name (each node failing on its own).
        case perAgent = "per-agent"
    }

    /// How the agents share the timeline.
    package var schedule: Schedule

    /// A fleet spec.
    package init(schedule: Schedule = .shared) { self.schedule = schedule }

    /// The seed of agent `agent`'s own timeline under `per-agent`: the fleet's seed mixed with the name (FNV-1a of the
    /// name, then a SplitMix64 step), so every host draws the same timeline for the same (seed, name).
    package static func agentSeed(_ seed: UInt64, agent: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in agent.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        var mixed = seed ^ hash &+ 0x9E37_79B9_7F4A_7C15
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
