/// Percentiles of a set of durations, in seconds.
public struct LatencySummary: Sendable, Codable, Equatable {
    /// How many samples.
    public var count: Int
    /// Median.
    public var p50: Double
    /// 95th percentile.
    public var p95: Double
    /// 99th percentile.
    public var p99: Double
    /// Largest sample.
    public var max: Double

    /// Creates a summary.
    public init(count: Int = 0, p50: Double = 0, p95: Double = 0, p99: Double = 0, max: Double = 0) {
        self.count = count
        self.p50 = p50
        self.p95 = p95
        self.p99 = p99
        self.max = max
    }

    /// The figure for `p50`, `p95`, `p99` or `max`.
    public func value(named name: String) -> Double? {
        switch name {
        case "p50": p50
        case "p95": p95
        case "p99": p99
        case "max": max
        default: nil
        }
    }
}
