import ChaosCore

extension Scenario {
    /// Whether a fault or the baseline link may make a path dead (partition, stall, handoff, a NAT's death, an offline
    /// link) or lose segments (loss, a lossy link): the run then says where a dead path's bytes stop and where loss is
    /// drawn (``ChaosProxy/KernelDeadPath``), and its kernel path is made before the pair starts.
    var mayKillPaths: Bool {
        faults.contains { [.partition, .stall, .handoff, .nat, .link, .loss].contains($0.kind) }
            || baseline?.offline == true || baseline?.natIdleTimeout != nil || baseline?.loss != nil
    }
}
