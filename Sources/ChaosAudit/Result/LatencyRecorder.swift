import Histogram

/// Records durations in an HdrHistogram (microsecond resolution, 3 significant digits) and summarises
/// them: constant memory however many samples.
struct LatencyRecorder {
    private var histogram: Histogram<UInt64>

    init() {
        histogram = Histogram<UInt64>(
            lowestDiscernibleValue: 1,
            highestTrackableValue: 3_600_000_000,
            numberOfSignificantValueDigits: .three
        )
        histogram.autoResize = true
    }

    /// Records `nanoseconds` (negative values count as 0).
    @inline(__always)
    mutating func record(nanoseconds: Int64) {
        let micros = nanoseconds <= 0 ? 0 : UInt64(nanoseconds / 1000)
        _ = histogram.record(micros)
    }

    /// How many samples.
    var count: Int { Int(histogram.totalCount) }

    /// How many samples are at or below `micros` microseconds.
    func counts(upToMicroseconds micros: UInt64) -> UInt64 { histogram.count(within: 0...micros) }

    /// The samples' sum in seconds.
    var sumSeconds: Double { histogram.totalCount == 0 ? 0 : histogram.mean * Double(histogram.totalCount) / 1e6 }

    /// p50 / p95 / p99 / max in seconds.
    var summary: LatencySummary {
        guard histogram.totalCount > 0 else { return LatencySummary() }
        func seconds(_ micros: UInt64) -> Double { Double(micros) / 1e6 }
        return LatencySummary(
            count: count,
            p50: seconds(histogram.valueAtPercentile(50)),
            p95: seconds(histogram.valueAtPercentile(95)),
            p99: seconds(histogram.valueAtPercentile(99)),
            max: seconds(histogram.max)
        )
    }
}
