package import ChaosCore
import ChaosReport
package import Foundation

/// `chaos shrink`: from a failed run, the smallest set of its faults, in the shortest run, that still fails the same
/// way, found by running the real pair again and again. A window of the faults before the failure, doubled until the
/// failure comes back; then delta debugging (ddmin) over that window's occurrences, each candidate run K times (K from
/// the failure rate measured so far, so that a flaky failure is kept with 95 % confidence); then shorter faults and
/// shorter gaps while it still fails; then the final rate over ``Options/finalRuns`` runs.
package final class Shrinker {
    /// How a shrink runs.
    package struct Options: Sendable {
        /// Wall-clock time allowed; the smallest reproducer so far is kept when it runs out.
        package var budget: Double = 20 * 60
        /// Where candidates, `repro.yaml`, `shrink.json` and `shrink.md` go.
        package var out: URL
        /// Time before the first fault of a candidate (the pair connected, streams flowing).
        package var warmup: ChaosDuration = .seconds(Int64(3))
        /// Time after the last fault ends (for the pair to recover, or not).
        package var settle: ChaosDuration = .seconds(Int64(8))
        /// Runs of the final reproducer that measure its failure rate.
        package var finalRuns = 10
        /// The first window before the failure, doubled until the failure comes back.
        package var firstWindowS = 10.0
        /// This chaos executable (candidates run as `chaos replay`).
        package var executable: String

        /// Options for a shrink into `out`, running `executable`.
        package init(out: URL, executable: String) {
            self.out = out
            self.executable = executable
        }
    }

    /// The stages of a shrink, as shrink.json names them.
    package enum Stage: String, Sendable, Codable, Equatable {
        /// A window of the faults before the failure (doubled until it fails).
        case window
        /// More runs of the window that failed: its failure rate.
        case rate
        /// Delta debugging over the window's faults.
        case ddmin
        /// Shorter faults and gaps.
        case simplify
        /// The final runs that measure the reproducer's rate.
        case final
    }

    /// Every candidate tried, with its runs.
    package struct Trial: Sendable, Codable, Equatable {
        /// Which stage tried it.
        package var stage: Stage
        /// The original occurrences it kept.
        package var occurrences: [Int]
        /// Its span (first start to last end), in seconds.
        package var spanS: Double
        /// Each run's outcome, in order.
        package var runs: [CandidateRunner.Outcome]
        /// Whether it kept the failure.
        package var reproduced: Bool
    }

    let scenario: Scenario
    let timeline: [FaultOccurrence]
    let target: ShrinkTarget
    let options: Options
    let runner: CandidateRunner
    let progress: (String) -> Void
    let started = Date()
    /// Every candidate tried so far, in order.
    package private(set) var trials: [Trial] = []
    private var candidateNumber = 0
    /// Runs and failures of the candidates that kept the failure: the measured failure rate.
    private var keptRuns = 0
    private var keptFailures = 0

    /// A shrink of `timeline` (the failed run's occurrences) toward `target`.
    package init(scenario: Scenario, timeline: [FaultOccurrence], target: ShrinkTarget, options: Options, progress: @escaping (String) -> Void) {
        self.scenario = scenario
        self.timeline = timeline
        self.target = target
        self.options = options
        self.progress = progress
        runner = CandidateRunner(executable: options.executable, scenario: scenario, target: target)
    }

    /// Seconds since the shrink began.
    package var elapsed: Double { Date().timeIntervalSince(started) }
    var budgetLeft: Double { options.budget - elapsed }

    /// The mean run's seconds so far (10 s before the first run).
    var averageRunSeconds: Double {
        let runs = trials.flatMap(\.runs)
        return runs.isEmpty ? 10 : runs.map(\.seconds).reduce(0, +) / Double(runs.count)
    }

    /// The budget left for the search: what the final runs will need is kept for them.
    var searchBudgetLeft: Double { budgetLeft - Double(options.finalRuns) * averageRunSeconds }

    /// The failure rate measured so far (at least 1 in 3 is assumed until measured: a flaky failure is not lost early).
    var measuredRate: Double {
        keptRuns == 0 ? 1.0 / 3.0 : max(Double(keptFailures) / Double(keptRuns), 0.05)
    }

    /// How many runs a candidate gets before it is judged not to fail: enough that one failing at the measured rate
    /// fails at least once with 95 % confidence (at most 12).
    var runsPerCandidate: Int {
        let rate = measuredRate
        guard rate < 1 else { return 1 }
        return min(12, max(1, Int((log(0.05) / log(1 - rate)).rounded(.up))))
    }

    /// The result: the smallest candidate that kept the failure, or nil when the failure never came back.
    /// A simplified reproducer of a steady failure that fails fewer than 8 of 10 final runs was shortened to the edge
    /// of what fails (a reset moved past the end of the latency that held what it lost passes two runs by luck): the
    /// unsimplified one is measured too, and the one that fails more often is kept.
    package func run() async throws -> (candidate: ShrinkCandidate, rate: (failures: Int, runs: Int))? {
        guard var best = try await window() else { return nil }
        best = try await ddmin(best)
        let unsimplified = best
        best = try await simplify(best)
        let wasSteady = steady  // before the final runs count in the measured rate
        var final = try await finalRate(best)
        if wasSteady, best != unsimplified, Double(final.failures) < 0.8 * Double(final.runs) {
            progress("the simplified reproducer failed \(final.failures) of \(final.runs): measuring it unsimplified")
            let other = try await finalRate(unsimplified)
            if other.failures * final.runs > final.failures * other.runs {
                best = unsimplified
                final = other
            }
        }
        return (best, final)
    }

    /// Whether a failure seen this often is a steady one: a smaller candidate must then fail every one of two runs to
    /// be kept (a flaky candidate that fails once by chance is not the steady reproducer the run had).
    var steady: Bool { keptRuns >= 3 && measuredRate >= 0.8 }

    /// Whether `candidate` fails: a flaky failure when any of up to `runs` runs fails (it stops at the first), a steady
    /// one when two runs both fail. Records the trial.
    func fails(_ candidate: ShrinkCandidate, stage: Stage, runs: Int? = nil) async throws -> Bool {
        let everyRun = runs == nil && steady
        let wanted = everyRun ? 2 : runs ?? runsPerCandidate
        var outcomes: [CandidateRunner.Outcome] = []
        var reproduced = false
        for index in 0..<wanted where (stage == .final ? budgetLeft > 0 || index == 0 : searchBudgetLeft > 0) {
            candidateNumber += 1
            let folder = options.out.appendingPathComponent("candidates").appendingPathComponent(String(format: "%04d", candidateNumber))
            let outcome = try await runner.run(
                candidate.timeline(seed: seed, warmup: options.warmup, settle: options.settle),
                in: folder
            )
            outcomes.append(outcome)
            if outcome.verdict != "fail" || !outcome.reproduced {
                // Only what a failing run left is worth a look.
                try? FileManager.default.removeItem(at: folder)
            }
            if everyRun {
                reproduced = outcome.reproduced
                if !reproduced { break }
            } else if outcome.reproduced {
                reproduced = true
                break
            }
        }
        if reproduced || stage == .final || stage == .rate {
            keptRuns += outcomes.count
            keptFailures += outcomes.filter(\.reproduced).count
        }
        trials.append(Trial(stage: stage, occurrences: candidate.originals, spanS: candidate.span.seconds, runs: outcomes, reproduced: reproduced))
        progress(
            "shrink: \(trials.count) candidates, \(outcomes.count) run(s) of \(candidate.occurrences.count) fault(s) \(reproduced ? "fail" : "pass"); "
                + "budget left \(Int(max(0, budgetLeft)))s"
        )
        return reproduced
    }

    var seed: UInt64 { scenario.seed ?? 0 }

    /// The occurrences active in the `width` seconds before the failure.
    func before(width: Double) -> ShrinkCandidate {
        let at = target.atTimelineS
        let entries = timeline.filter { $0.at.seconds <= at && $0.end.seconds >= at - width }.map {
            ShrinkCandidate.Entry(original: $0.index, occurrence: $0)
        }
        return ShrinkCandidate(entries)
    }

    /// Windows of the faults before the failure, doubling from ``Options/firstWindowS`` until one fails.
    func window() async throws -> ShrinkCandidate? {
        var width = options.firstWindowS
        var tried: [Int] = []
        while searchBudgetLeft > 0 {
            let candidate = before(width: width)
            if !candidate.occurrences.isEmpty, candidate.originals != tried {
                tried = candidate.originals
                // A window gets three runs when the rate is unknown: a flaky failure still shows.
                if try await fails(candidate, stage: .window, runs: keptRuns == 0 ? 3 : nil) {
                    // Two more runs measure how flaky it is.
                    _ = try await fails(candidate, stage: .rate, runs: 1)
                    _ = try await fails(candidate, stage: .rate, runs: 1)
                    return candidate
                }
            }
            if width > target.atTimelineS + 1 { return nil }
            width *= 2
        }
        return nil
    }

    /// Delta debugging (Zeller's ddmin): subsets, then complements, at finer and finer granularity.
    func ddmin(_ start: ShrinkCandidate) async throws -> ShrinkCandidate {
        var current = start.occurrences
        var parts = 2
        while current.count >= 2, searchBudgetLeft > 0 {
            let chunks = Self.split(current, into: parts)
            var reduced = false
            for chunk in chunks where try await fails(ShrinkCandidate(chunk), stage: .ddmin) {
                current = chunk
                parts = 2
                reduced = true
                break
            }
            if !reduced, parts > 2 {
                for index in chunks.indices {
                    let complement = chunks.enumerated().filter { $0.offset != index }.flatMap(\.element)
                    if try await fails(ShrinkCandidate(complement), stage: .ddmin) {
                        current = complement
                        parts = max(parts - 1, 2)
                        reduced = true
                        break
                    }
                }
            }
            if !reduced {
                if parts >= current.count { break }
                parts = min(current.count, parts * 2)
            }
        }
        return ShrinkCandidate(current)
    }

    /// `items` in `parts` chunks of nearly equal size, in order.
    static func split<T>(_ items: [T], into parts: Int) -> [[T]] {
        let size = Double(items.count) / Double(parts)
        var chunks: [[T]] = []
        for part in 0..<parts {
            let lower = Int((Double(part) * size).rounded())
            let upper = Int((Double(part + 1) * size).rounded())
            if lower < upper { chunks.append(Array(items[lower..<upper])) }
        }
        return chunks
    }

    /// Shorter faults (halved while they still fail, down to 500 ms), then shorter gaps between them (halved).
    func simplify(_ start: ShrinkCandidate) async throws -> ShrinkCandidate {
        var best = start
        for index in best.occurrences.indices where searchBudgetLeft > 0 {
            for _ in 0..<3 {
                var entry = best.occurrences[index]
                let lasts = entry.occurrence.lasts
                guard lasts.nanoseconds >= 1_000_000_000, entry.occurrence.kind != .handoff else { break }
                entry.occurrence.lasts = .nanoseconds(lasts.nanoseconds / 2)
                let shorter = best.replacing(index, with: entry)
                guard try await fails(shorter, stage: .simplify) else { break }
                best = shorter
            }
        }
        // Gaps: each fault moved halfway toward the end of the one before it.
        for index in best.occurrences.indices.dropFirst() where searchBudgetLeft > 0 {
            let previous = best.occurrences[index - 1].occurrence
            var entry = best.occurrences[index]
            let gap = entry.occurrence.at - previous.end
            guard gap.nanoseconds >= 1_000_000_000 else { continue }
            entry.occurrence.at = entry.occurrence.at - .nanoseconds(gap.nanoseconds / 2)
            let closer = best.replacing(index, with: entry)
            if try await fails(closer, stage: .simplify) { best = closer }
        }
        return best
    }

    /// The reproducer's failure rate over ``Options/finalRuns`` runs (the search kept time for them; fewer when the
    /// budget runs out all the same, but at least one).
    func finalRate(_ candidate: ShrinkCandidate) async throws -> (failures: Int, runs: Int) {
        var failures = 0
        var runs = 0
        for _ in 0..<options.finalRuns where budgetLeft > 0 || runs == 0 {
            let failed = try await fails(candidate, stage: .final, runs: 1)
            runs += 1
            if failed { failures += 1 }
        }
        return (failures, runs)
    }
}
