/// Percentiles of a set of durations, in seconds.
package struct LatencySummary: Sendable, Codable, Equatable {
    /// How many samples.
    package var count: Int
    /// Median.
    package var p50: Double
    /// 95th percentile.
    package var p95: Double
    /// 99th percentile.
    package var p99: Double
    /// Largest sample.
    package var max: Double

    /// Creates a summary.
    package init(count: Int = 0, p50: Double = 0, p95: Double = 0, p99: Double = 0, max: Double = 0) {
        self.count = count
        self.p50 = p50
        self.p95 = p95
        self.p99 = p99
        self.max = max
    }

    /// The figure for `p50`, `p95`, `p99` or `max`.
    package func value(named name: String) -> Double? {
        switch name {
        case "p50": p50
        case "p95": p95
        case "p99": p99
        case "max": max
        default: nil
        }
    }
}
