import Foundation
import Testing

extension ReportJSON {
    /// The invariants every report keeps, finished or not.
    func checkConsistentCounts(sourceLocation: SourceLocation = #_sourceLocation) {
        var sum = Counts()
        for stream in streams {
            let counts = stream.counts
            #expect(counts.allNonNegative, "\(stream.key): \(counts)", sourceLocation: sourceLocation)
            #expect(counts.ok <= counts.delivered, "\(stream.key)", sourceLocation: sourceLocation)
            if let highest = stream.highestSeq {
                // ok + lost (+ unconfirmed) covers every seq from 1 to the highest seen (delivered, or sent and never
                // delivered, or taken before a reset and never settled).
                #expect(
                    counts.ok <= highest && counts.ok + counts.lost + stream.unconfirmed >= highest,
                    "\(stream.key)",
                    sourceLocation: sourceLocation
                )
            }
            let ratio = counts.ok + counts.lost == 0 ? 1 : Double(counts.ok) / Double(counts.ok + counts.lost)
            #expect(abs(counts.deliveryRatio - ratio) < 1e-9, "\(stream.key)", sourceLocation: sourceLocation)
            sum.add(counts)
        }
        #expect(totals.allNonNegative, "\(totals)", sourceLocation: sourceLocation)
        #expect(
            sum.sent == totals.sent && sum.delivered == totals.delivered && sum.ok == totals.ok
                && sum.lost == totals.lost && sum.recovered == totals.recovered && sum.duplicated == totals.duplicated
                && sum.redelivered == totals.redelivered && sum.reordered == totals.reordered && sum.gaps == totals.gaps,
            "totals \(totals) are the sum of the streams \(sum)",
            sourceLocation: sourceLocation
        )
        #expect(totals.ok > 0, sourceLocation: sourceLocation)
    }
}

// MARK: - Support
