package import ChaosCore

/// `chaos replay DIR --window A..B` (or `--around-failure N --before D`): only the fault occurrences of that window of
/// the run's timeline, moved so that the window starts after a warm-up (the pair started, its streams flowing), in a
/// run that lasts the window plus a settle time.
package enum ReplayWindow {
    /// The pair's time to start and connect before the window's first moment.
    package static let warmup = ChaosDuration.seconds(Int64(3))
    /// The time after the window for the pair to recover (or not).
    package static let settle = ChaosDuration.seconds(Int64(10))

    /// The occurrences of `timeline` active in `window` (times on its own clock), renumbered from 0 and moved by
    /// `warmup - window.lower` (one that began before the window starts at the warm-up's end, for what is left of it);
    /// with each one's index in the original timeline.
    package static func timeline(
        _ timeline: Timeline,
        window: ClosedRange<ChaosDuration>,
        warmup: ChaosDuration = warmup,
        settle: ChaosDuration = settle
    ) -> (timeline: Timeline, originals: [Int]) {
        var occurrences: [FaultOccurrence] = []
        var originals: [Int] = []
        for occurrence in timeline {
            if occurrence.at > window.upperBound { break }
            guard occurrence.end >= window.lowerBound else { continue }
            var moved = occurrence
            if occurrence.at < window.lowerBound {
                moved.lasts = occurrence.end - window.lowerBound
                moved.at = warmup
            } else {
                moved.at = warmup + (occurrence.at - window.lowerBound)
            }
            moved.index = occurrences.count
            occurrences.append(moved)
            originals.append(occurrence.index)
        }
        let duration = warmup + (window.upperBound - window.lowerBound) + settle
        return (Timeline(seed: timeline.seed, duration: duration, occurrences: occurrences), originals)
    }
}
