package import ChaosCore

/// A set of a failed run's fault occurrences, re-timed to start after a warm-up: what `chaos shrink` runs to see
/// whether the failure still happens with fewer faults.
package struct ShrinkCandidate: Sendable, Equatable, Codable {
    /// The occurrences, in time order, each with its index in the original run's timeline (`original`).
    package var occurrences: [Entry]

    /// One occurrence of a candidate.
    package struct Entry: Sendable, Equatable, Codable {
        /// Its index in the original run's timeline.
        package var original: Int
        /// The occurrence (its `at` on the original timeline, its `lasts` possibly shortened).
        package var occurrence: FaultOccurrence

        /// An entry.
        package init(original: Int, occurrence: FaultOccurrence) {
            self.original = original
            self.occurrence = occurrence
        }
    }

    /// A candidate of `occurrences` (sorted by time).
    package init(_ occurrences: [Entry]) {
        self.occurrences = occurrences.sorted { ($0.occurrence.at, $0.original) < ($1.occurrence.at, $1.original) }
    }

    /// The original indices, in time order.
    package var originals: [Int] { occurrences.map(\.original) }

    /// From the first fault's start to the last one's end.
    package var span: ChaosDuration {
        guard let first = occurrences.first?.occurrence.at else { return .zero }
        return (occurrences.map(\.occurrence.end).max() ?? first) - first
    }

    /// The timeline to run: the first fault `warmup` after the timeline's start, the others at the same distances as
    /// before, numbered from 0; the run lasts until `settle` after the last fault ends.
    package func timeline(seed: UInt64, warmup: ChaosDuration, settle: ChaosDuration) -> Timeline {
        let first = occurrences.first?.occurrence.at ?? .zero
        let shifted = occurrences.enumerated().map { index, entry in
            var occurrence = entry.occurrence
            occurrence.index = index
            occurrence.at = warmup + (occurrence.at - first)
            return occurrence
        }
        return Timeline(seed: seed, duration: warmup + span + settle, occurrences: shifted)
    }

    /// The same occurrences with `entry` replaced.
    package func replacing(_ index: Int, with entry: Entry) -> ShrinkCandidate {
        var entries = occurrences
        entries[index] = entry
        return ShrinkCandidate(entries)
    }

    /// `3 faults over 12.5s: partition #12, disconnect #15, latency #20`.
    package var summary: String {
        "\(occurrences.count) fault\(occurrences.count == 1 ? "" : "s") over \(span): "
            + occurrences.map { "\($0.occurrence.kind.rawValue) #\($0.original)" }.joined(separator: ", ")
    }
}
