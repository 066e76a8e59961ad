package import ChaosCore

/// Exponential backoff with full jitter: the n-th consecutive retry waits a uniform draw from
/// `[0, min(cap, base · 2ⁿ)]` ("Exponential Backoff And Jitter", AWS architecture blog).
///
/// A pure function of (attempt, generator state): same seed, same delays.
package struct BackoffPolicy: Hashable, Sendable {
    /// Upper bound of the first retry's draw.
    package var base: ChaosDuration
    /// Upper bound no draw exceeds.
    package var cap: ChaosDuration

    /// The default: base 500 ms, cap 32 s.
    package static let standard = BackoffPolicy(base: .milliseconds(500), cap: .seconds(Int64(32)))

    /// A policy with the given base and cap.
    package init(base: ChaosDuration, cap: ChaosDuration) {
        self.base = base
        self.cap = cap
    }

    /// The largest delay the retry after `failures` consecutive failures may draw (0-based).
    package func ceiling(afterFailures failures: Int) -> ChaosDuration {
        let cap = max(self.cap.nanoseconds, 0)
        var ceiling = max(base.nanoseconds, 0)
        var doublings = 0
        // base · 2ⁿ, saturating at the cap without overflowing.
        while doublings < failures, ceiling > 0, ceiling < cap {
            ceiling = ceiling > Int64.max / 2 ? cap : ceiling * 2
            doublings += 1
        }
        return ChaosDuration(nanoseconds: min(ceiling, cap))
    }

    /// The delay before the retry that follows `failures` consecutive failures.
    package func delay(afterFailures failures: Int, using generator: inout SeededGenerator) -> ChaosDuration {
        let ceiling = ceiling(afterFailures: failures).nanoseconds
        if ceiling <= 0 { return .zero }
        return ChaosDuration(nanoseconds: Int64(generator.next(upperBound: UInt64(ceiling) + 1)))
    }
}
