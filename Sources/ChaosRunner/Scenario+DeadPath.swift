import ChaosCore

extension Scenario {
    /// Whether a fault or the baseline link may make a path dead (partition, stall, handoff, a NAT's death, an offline
    /// link): the run then says where a dead path's bytes stop (``ChaosProxy/KernelDeadPath``).
    var mayKillPaths: Bool {
        faults.contains { [.partition, .stall, .handoff, .nat, .link].contains($0.kind) }
            || baseline?.offline == true || baseline?.natIdleTimeout != nil
    }
}
