/// The consumer side of one stream and direction: decides whether an arriving seq is new (process it),
/// already processed (drop it: deduplication after a resume), or skips ahead (process it; the hole is
/// reported). Cumulative acknowledgements are its `lastProcessed`.
package struct InboundSequencer: Hashable, Sendable {
    /// What to do with an arriving message.
    package enum Verdict: Hashable, Sendable {
        /// The next seq in order: process it.
        case process
        /// Already processed: drop it.
        case duplicate
        /// Later than the next expected seq: process it; the seqs in `missing` never arrived.
        case processAfterHole(missing: ClosedRange<Int>)
    }

    /// Highest seq processed (0 before the first).
    package private(set) var lastProcessed: Int
    /// When false every message is processed, in whatever order it comes (the naive peer's mode).
    package var deduplicates: Bool

    /// A sequencer that has processed every seq ≤ `lastProcessed`.
    package init(lastProcessed: Int = 0, deduplicates: Bool = true) {
        self.lastProcessed = lastProcessed
        self.deduplicates = deduplicates
    }

    /// Classifies `seq` and, unless it is a duplicate, records it as processed.
    package mutating func accept(_ seq: Int) -> Verdict {
        if !deduplicates {
            let hole = seq > lastProcessed + 1 ? (lastProcessed + 1)...(seq - 1) : nil
            lastProcessed = seq
            return hole.map { .processAfterHole(missing: $0) } ?? .process
        }
        if seq <= lastProcessed { return .duplicate }
        defer { lastProcessed = seq }
        if seq == lastProcessed + 1 { return .process }
        return .processAfterHole(missing: (lastProcessed + 1)...(seq - 1))
    }

    /// Records the producer's `GAP` marker: seqs up to `to` will never come. Returns the seqs that
    /// were skipped here (nil when they had all been processed already).
    package mutating func skip(through to: Int) -> ClosedRange<Int>? {
        guard to > lastProcessed else { return nil }
        defer { lastProcessed = to }
        return (lastProcessed + 1)...to
    }
}
