/// A histogram of durations as Prometheus wants one: cumulative counts at fixed upper bounds, the count and the sum.
package struct DurationHistogram: Sendable, Equatable {
    /// The upper bounds, in seconds (ascending); the implicit last one is +Inf.
    package var bounds: [Double]
    /// How many samples are at or below each bound.
    package var cumulative: [UInt64]
    /// How many samples in all.
    package var count: UInt64
    /// Their sum, in seconds (from the histogram's buckets: within its 3 significant digits).
    package var sumSeconds: Double

    /// The bounds chaos exposes recovery times at, in seconds.
    package static let recoveryBounds: [Double] = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]

    /// The bounds chaos exposes transit times at, in seconds: a message from the proxy's read of it to the consumer's
    /// acknowledgement of its last byte (milliseconds on a quiet path, seconds behind a fault).
    package static let transitBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
}

extension LatencyRecorder {
    /// The samples at `bounds` (seconds).
    func histogram(bounds: [Double]) -> DurationHistogram {
        let cumulative = bounds.map { bound -> UInt64 in
            count == 0 ? 0 : counts(upToMicroseconds: UInt64(max(0, bound * 1e6)))
        }
        return DurationHistogram(bounds: bounds, cumulative: cumulative, count: UInt64(count), sumSeconds: sumSeconds)
    }
}

extension AuditEngine {
    /// The recovery measurements so far (reconnect: disruption to the next accepted connection; resume: disruption to
    /// a stream's first new message) as histograms at `bounds` seconds.
    package func recoveryHistograms(
        bounds: [Double] = DurationHistogram.recoveryBounds
    )
        -> (reconnect: DurationHistogram, resume: DurationHistogram)
    {
        (recovery.reconnect.histogram(bounds: bounds), recovery.resume.histogram(bounds: bounds))
    }
}

extension AuditEngine {
    /// The messages' transit times so far (the proxy's read to the consumer's acknowledgement) as a histogram at
    /// `bounds` seconds.
    package func transitHistogram(bounds: [Double] = DurationHistogram.transitBounds) -> DurationHistogram {
        transit.histogram(bounds: bounds)
    }
}
