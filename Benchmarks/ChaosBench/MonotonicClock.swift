#if canImport(Glibc)
import Glibc
#endif

/// Nanoseconds from CLOCK_MONOTONIC: cheap enough to read around every round trip.
enum MonotonicClock {
    /// Now, in nanoseconds since an arbitrary fixed point.
    static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Seconds elapsed since `start` (a value of ``nanoseconds()``).
    static func seconds(since start: UInt64) -> Double { Double(nanoseconds() &- start) / 1e9 }
}
