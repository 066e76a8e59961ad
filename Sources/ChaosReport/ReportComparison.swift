import ChaosAudit
import Foundation

/// What got worse (or better) between a baseline run and this one.
package struct ReportComparison: Sendable, Codable, Equatable {
    /// One compared figure.
    package struct Row: Sendable, Codable, Equatable {
        /// The figure (`lost`, `delivery`, `recovery_p99`, …).
        package var figure: String
        /// Its baseline value.
        package var baseline: Double
        /// Its value now.
        package var current: Double
        /// Whether it got worse.
        package var worse: Bool
    }

    /// The baseline's folder.
    package var baseline: String
    /// The baseline's verdict.
    package var baselineVerdict: RunReport.Verdict
    /// This run's verdict.
    package var currentVerdict: RunReport.Verdict
    /// Every compared figure.
    package var rows: [Row]
    /// Expectations that held in the baseline and fail now.
    package var newlyFailing: [String]

    /// The figures that got worse.
    package var worse: [Row] { rows.filter(\.worse) }

    /// Compares `current` with `baseline` (read from folder `baselineName`).
    package init(current: RunReport, baseline: RunReport, baselineName: String) {
        self.baseline = baselineName
        baselineVerdict = baseline.verdict
        currentVerdict = current.verdict
        let higherIsWorse = [
            "lost", "duplicated", "redelivered", "reordered", "gaps", "unacked", "truncated",
            "recovery_p50", "recovery_p99", "recovery_max", "reconnect_p99", "transit_p99",
        ]
        var rows: [Row] = []
        for figure in higherIsWorse {
            guard let now = current.measured(figure), let before = baseline.measured(figure) else { continue }
            rows.append(Row(figure: figure, baseline: before, current: now, worse: now > before * 1.1 + 1e-6 && now > before))
        }
        let ratio = Row(
            figure: "delivery",
            baseline: baseline.totals.deliveryRatio,
            current: current.totals.deliveryRatio,
            worse: current.totals.deliveryRatio < baseline.totals.deliveryRatio - 1e-9
        )
        rows.insert(ratio, at: 0)
        self.rows = rows
        let passedBefore = Set(baseline.expectations.filter(\.ok).map(\.name))
        newlyFailing = current.expectations.filter { !$0.ok && passedBefore.contains($0.name) }.map(\.name)
    }

    /// The comparison as Markdown lines.
    package func markdownLines() -> [String] {
        var lines: [String] = []
        let worse = self.worse
        let verdicts = "verdict " + baselineVerdict.rawValue + " → " + currentVerdict.rawValue
        let failing = newlyFailing.map { name in "`" + name + "`" }.joined(separator: ", ")
        if worse.isEmpty && newlyFailing.isEmpty {
            lines.append("Nothing got worse than `" + baseline + "` (" + verdicts + ").")
        } else {
            let tail = newlyFailing.isEmpty ? "." : "; newly failing: " + failing + "."
            lines.append("**\(worse.count) figure(s) got worse** than `" + baseline + "` (" + verdicts + ")" + tail)
        }
        lines += ["", "| figure | baseline | now | |", "|---|--:|--:|---|"]
        for row in rows {
            lines.append(
                "| \(row.figure) | \(RunReport.format(row.baseline, for: row.figure)) | \(RunReport.format(row.current, for: row.figure)) | \(row.worse ? "**worse**" : "") |"
            )
        }
        return lines
    }
}
