package import Foundation

/// A fleet agent's wall clock, as it reports it: in its event file's header (the run's zero) and on `GET /clock`, from
/// which `chaos report --merge URL` measures how far the agent's host clock is from the merging host's.
///
/// `CHAOS_TEST_CLOCK_SKEW` (seconds, may be negative or fractional) sets this clock ahead of the host's: a test hook
/// standing for a host whose clock is off, so a test on one machine can check that the merge measures and removes it.
package enum AgentClock {
    /// Nanoseconds this process's agent clock is ahead of the host's (0 unless the test hook sets it).
    package static let skewNanoseconds: Int64 = {
        guard let text = ProcessInfo.processInfo.environment["CHAOS_TEST_CLOCK_SKEW"], let seconds = Double(text),
            seconds.isFinite, abs(seconds) < 86_400
        else { return 0 }
        return Int64((seconds * 1e9).rounded())
    }()

    /// `date` on this agent's clock, in nanoseconds since 1970.
    package static func nanoseconds(of date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1e9).rounded()) + skewNanoseconds
    }

    /// Now on this agent's clock, in nanoseconds since 1970.
    package static func now() -> Int64 { hostNow() + skewNanoseconds }

    /// Now on the host's own clock (no test skew), in nanoseconds since 1970: the merging host's side of a measurement.
    package static func hostNow() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
