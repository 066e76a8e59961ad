import ChaosAudit
import ChaosCore

extension Scenario {
    /// The NAT timeout (the shortest) and radio tail (the longest) that the scenario's baseline profile and fault
    /// rules can put on the path, for judging the pair's keepalive; nil when none can.
    var pathLimits: PathLimits? {
        var limits = PathLimits()
        func add(_ profile: LinkProfile?) {
            guard let profile else { return }
            if let radio = profile.radio { add(radio) }
            if let timeout = profile.natIdleTimeout { add(nat: timeout) }
        }
        func add(_ radio: RadioModel) { limits.radioTail = max(limits.radioTail ?? 0, radio.tail.nanoseconds) }
        func add(nat timeout: ChaosDuration) { limits.natIdleTimeout = min(limits.natIdleTimeout ?? .max, timeout.nanoseconds) }
        add(baseline)
        for rule in faults {
            switch rule.parameters {
            case .radio(let radio): add(radio)
            case .nat(let timeout): add(nat: timeout)
            case .link(let profile): add(profile)
            case .handoff(let from, let to, _, _, _, _):
                add(from)
                add(to)
            default: break
            }
        }
        return limits == PathLimits() ? nil : limits
    }
}
