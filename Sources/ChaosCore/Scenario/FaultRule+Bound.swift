/// A fault given on its own, through the control API, is drawn over a bound (the run's end, and at most ten years
/// from its request) rather than a scenario's run: one that could only begin at or past that bound, or last past it,
/// is refused with the reason rather than accepted with an empty timeline, as a scenario file refuses a fault past
/// its run.
extension FaultRule {
    /// Checks that the fault begins before `bound` and, once begun, ends by it; `source` names where it came from.
    package func checkBegins(within bound: ChaosDuration, source: String) throws {
        let limit =
            bound >= Scenario.longestDuration
            ? "within 10 years of its request" : "within the run, which ends \(bound) after the proxy's start"
        func bad(_ what: String) -> ChaosError {
            .badInput("\(source): fault.\(what) (a fault through the API must begin and end \(limit))")
        }
        if let at = schedule.at {
            guard at.upper < bound else { throw bad("at \(at) is not before \(bound): it would never happen") }
            let lasts = schedule.lasts?.upper ?? .zero
            let (end, overflow) = at.upper.nanoseconds.addingReportingOverflow(lasts.nanoseconds)
            guard !overflow, end <= bound.nanoseconds else { throw bad("at \(at) plus for \(lasts) ends past \(bound)") }
        }
        if schedule.every != nil, schedule.after >= bound {
            throw bad("after \(schedule.after) is not before \(bound): it would never happen")
        }
    }
}
