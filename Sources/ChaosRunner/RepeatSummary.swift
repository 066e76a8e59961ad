package import Foundation

/// `chaos run --repeat N` (or `--until-fail`): the same scenario and fault timeline run again and again with a fresh
/// pair, because the bugs worth finding are flaky. Each run has its folder (`run-001/` …) and the summary
/// (`summary.json`, `summary.md`) sits beside them: how many failed, with a 95 % confidence interval for the failure
/// rate, and the failures by verdict.
package struct RepeatSummary: Sendable, Codable, Equatable {
    /// One run of the series.
    package struct Entry: Sendable, Codable, Equatable {
        /// 1, 2, …
        package var index: Int
        /// `pass`, `fail`, `inconclusive` or `error`.
        package var verdict: String
        /// Why it did not pass (its first reason).
        package var reason: String?
        /// Its run folder.
        package var folder: String

        /// An entry.
        package init(index: Int, verdict: String, reason: String?, folder: String) {
            self.index = index
            self.verdict = verdict
            self.reason = reason
            self.folder = folder
        }
    }

    /// `chaos.repeat/1`.
    package var schema = "chaos.repeat/1"
    /// The scenario's name.
    package var scenario: String
    /// The seed every run's fault timeline was drawn from.
    package var seed: UInt64
    /// The runs asked for (`--repeat`), or the most `--until-fail` allows.
    package var planned: Int
    /// Whether the series stops at the first run that does not pass.
    package var untilFail: Bool
    /// The runs, in order.
    package var runs: [Entry] = []

    /// A series not yet run.
    package init(scenario: String, seed: UInt64, planned: Int, untilFail: Bool) {
        self.scenario = scenario
        self.seed = seed
        self.planned = planned
        self.untilFail = untilFail
    }

    /// Runs that did not pass (failed or inconclusive; errors are counted apart).
    package var failed: Int { runs.filter { $0.verdict == "fail" || $0.verdict == "inconclusive" }.count }
    /// Runs that could not be judged.
    package var errors: Int { runs.filter { $0.verdict == "error" }.count }
    /// Runs by verdict.
    package var byVerdict: [String: Int] { Dictionary(runs.map { ($0.verdict, 1) }, uniquingKeysWith: +) }

    /// The failure rate's 95 % confidence interval (Wilson's score interval: sound for a handful of runs and for
    /// rates near 0 or 1), over the runs that were judged.
    package var confidenceInterval: (low: Double, high: Double) {
        Self.wilson(failures: failed, runs: runs.count - errors)
    }

    /// Wilson's 95 % score interval for `failures` out of `runs`.
    package static func wilson(failures: Int, runs: Int) -> (low: Double, high: Double) {
        guard runs > 0 else { return (0, 1) }
        let n = Double(runs)
        let p = Double(failures) / n
        let z = 1.959964
        let denominator = 1 + z * z / n
        let center = (p + z * z / (2 * n)) / denominator
        let half = z * ((p * (1 - p) / n + z * z / (4 * n * n)).squareRoot()) / denominator
        return (max(0, center - half), min(1, center + half))
    }

    /// The exit code of the series: 1 when a run failed or was inconclusive, else 2 when one could not be judged, else 0.
    package var exitCode: Int32 { failed > 0 ? 1 : errors > 0 ? 2 : 0 }

    /// One line: `3 of 10 runs failed (30%, 95% CI 11%–60%)`.
    package var headline: String {
        let judged = runs.count - errors
        let (low, high) = confidenceInterval
        let rate =
            judged == 0
            ? "no run judged" : String(format: "%.0f%%, 95%% CI %.0f%%–%.0f%%", Double(failed) / Double(judged) * 100, low * 100, high * 100)
        return "\(failed) of \(runs.count) run\(runs.count == 1 ? "" : "s") failed (\(rate))" + (errors > 0 ? "; \(errors) could not be judged" : "")
    }

    /// summary.md: the headline, the counts by verdict, a row per run.
    package var markdown: String {
        var lines = ["## chaos repeat: \(scenario) (seed \(seed))", "", headline + ".", ""]
        lines.append("By verdict: " + byVerdict.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ".")
        lines += ["", "| run | verdict | why | folder |", "|--:|---|---|---|"]
        for run in runs {
            lines.append("| \(run.index) | \(run.verdict) | \(run.reason ?? "") | \(run.folder) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Writes summary.json and summary.md into `folder`.
    package func write(to folder: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        var object = try JSONSerialization.jsonObject(with: encoder.encode(self)) as? [String: Any] ?? [:]
        let (low, high) = confidenceInterval
        object["failed"] = failed
        object["errors"] = errors
        object["failure_rate_ci95"] = [low, high]
        object["by_verdict"] = byVerdict
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        try data.write(to: folder.appendingPathComponent("summary.json"))
        try Data(markdown.utf8).write(to: folder.appendingPathComponent("summary.md"))
    }
}
