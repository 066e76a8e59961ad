/// Counts per time bucket for the report's timeline (message rate, reconnects). Bounded: when the run
/// outgrows ``maximumBuckets`` the bucket width doubles and neighbours merge.
package struct ActivitySeries: Sendable, Codable, Equatable {
    /// The most buckets kept.
    package static let maximumBuckets = 600

    /// Bucket width in seconds.
    package var bucketS: Double { Double(bucketNanoseconds) / 1e9 }
    /// Bucket width in nanoseconds.
    package var bucketNanoseconds: Int64
    /// Messages delivered per bucket.
    package var delivered: [Int64] = []
    /// Connections accepted per bucket.
    package var opened: [Int64] = []
    /// Connections closed per bucket.
    package var closed: [Int64] = []
    /// Connection attempts refused per bucket.
    package var refused: [Int64] = []

    /// An empty series with `bucketNanoseconds` wide buckets (one second by default).
    package init(bucketNanoseconds: Int64 = 1_000_000_000) {
        self.bucketNanoseconds = bucketNanoseconds
    }

    /// Which series to count into.
    enum Series { case delivered, opened, closed, refused }

    /// Counts one event at `time` (ns).
    @inline(__always)
    mutating func count(_ series: Series, at time: Int64, by amount: Int64 = 1) {
        var bucket = Int(max(0, time) / bucketNanoseconds)
        while bucket >= Self.maximumBuckets {
            widen()
            bucket = Int(max(0, time) / bucketNanoseconds)
        }
        switch series {
        case .delivered: Self.add(&delivered, bucket, amount)
        case .opened: Self.add(&opened, bucket, amount)
        case .closed: Self.add(&closed, bucket, amount)
        case .refused: Self.add(&refused, bucket, amount)
        }
    }

    @inline(__always)
    private static func add(_ values: inout [Int64], _ bucket: Int, _ amount: Int64) {
        if bucket >= values.count { values.append(contentsOf: repeatElement(0, count: bucket - values.count + 1)) }
        values[bucket] += amount
    }

    private mutating func widen() {
        bucketNanoseconds *= 2
        func merge(_ values: [Int64]) -> [Int64] {
            stride(from: 0, to: values.count, by: 2).map { values[$0] + ($0 + 1 < values.count ? values[$0 + 1] : 0) }
        }
        delivered = merge(delivered)
        opened = merge(opened)
        closed = merge(closed)
        refused = merge(refused)
    }

    private enum CodingKeys: String, CodingKey { case bucketNanoseconds, delivered, opened, closed, refused }
}
