import ChaosAudit
import ChaosCore
import ChaosProtocols
import Foundation

/// Renders a report as the pull-request summary: verdict line first, then expectations, delivery per stream,
/// faults, recovery percentiles, the first anomalies and the command to reproduce.
package struct MarkdownRenderer: Sendable {
    /// Plain Markdown, or GitHub's (emoji verdict, long sections folded in `<details>`).
    package enum Flavor: Sendable { case plain, github }

    /// The flavor.
    package var flavor: Flavor
    /// Rows shown at most in the fault and anomaly tables.
    package var rowLimit = 20

    /// The run folder the report is in, when known: a failed run's report ends with the command that shrinks it.
    package var runFolder: String?

    /// Creates a renderer.
    package init(flavor: Flavor = .plain, runFolder: String? = nil) {
        self.flavor = flavor
        self.runFolder = runFolder
    }

    /// The Markdown text.
    package func render(_ report: RunReport, comparison: ReportComparison? = nil) -> String {
        var out: [String] = [verdictLine(report), ""]
        if let reasons = report.inconclusive, report.verdict == .inconclusive {
            out += ["> The run judged too little to pass:"] + reasons.map { "> - \($0)" } + [""]
        } else if let reason = report.verdictReason {
            out += ["> \(reason)", ""]
            if let reasons = report.inconclusive { out += ["> It also judged too little:"] + reasons.map { "> - \($0)" } + [""] }
        }
        let unfired = report.unfiredFaults
        if !unfired.isEmpty {
            out += unfired.prefix(rowLimit).map { "\(warning) \($0.kind) #\($0.occurrence) touched no connection." }
            if unfired.count > rowLimit { out.append("\(warning) … and \(unfired.count - rowLimit) more faults touched no connection.") }
            out.append("")
        }
        if report.totals.unconfirmed > 0 {
            let streams = report.streams.filter { $0.counts.unconfirmed > 0 }.map { "\($0.stream) \($0.direction.rawValue)" }
            out += [
                "\(warning) \(report.totals.unconfirmed) seq\(report.totals.unconfirmed == 1 ? "" : "s") unconfirmed (\(streams.prefix(5).joined(separator: ", "))"
                    + "\(streams.count > 5 ? ", …" : "")): the consumer's TCP took them on a connection that then ended in a reset, "
                    + "past its last ack, and no later ack or resend settled them. Counted neither ok nor lost.", "",
            ]
        }
        if report.lostAtMostOnce > 0 {
            let streams = report.streams.filter { $0.contract == .atMostOnce && $0.counts.lost > 0 }.map {
                "\($0.stream) \($0.direction.rawValue)\($0.receiver.map { " → \($0)" } ?? "")"
            }
            out += [
                "\(warning) \(report.lostAtMostOnce) seq\(report.lostAtMostOnce == 1 ? "" : "s") lost from at-most-once streams "
                    + "(\(streams.prefix(5).joined(separator: ", "))\(streams.count > 5 ? ", …" : "")): their contract (QoS 0) lets "
                    + "them be lost, so `lost` does not judge them; `expect: {lost_qos0: 0}` does.", "",
            ]
        }
        if let held = report.auditBackpressureS, held >= 0.001 {
            out += [
                "> The audit could not keep up: the relay waited \(ReportText.seconds(held)) in all for it, so the pair saw "
                    + "a slower network than the scenario's faults alone made.", "",
            ]
        }
        let t = report.totals
        out.append(
            "Scenario `\(report.scenario)`, seed \(report.seed), started \(report.startedAt), ran "
                + ReportText.seconds(report.elapsedS) + (report.complete ? "" : " (checkpoint: the run is still going or was killed)")
                + ". \(report.faults.count) faults, \(report.connections.opened) connections opened, "
                + "\(report.connections.cutByFault) cut by faults, \(report.connections.refused) refused."
        )
        out.append("")
        if !report.expectations.isEmpty {
            out += ["### Expectations", "", "| expectation | expected | actual | result |", "|---|---|---|---|"]
            for e in report.expectations {
                out.append("| `\(e.name)` | \(e.expected) | \(e.actual) | \(e.ok ? mark(true) + " pass" : mark(false) + " **fail**") |")
            }
            out.append("")
        }
        if let failures = report.failures, !failures.isEmpty {
            var lines = failures.prefix(rowLimit).map { "- \($0.account)" }
            if failures.count > rowLimit { lines.append("- … and \(failures.count - rowLimit) more (report.json `failures`)") }
            out += section("Failures (\(failures.count), the first at \(ReportText.clock(failures[0].atS)))", lines)
        }
        out += [
            "### Delivery", "",
            "| stream | direction | sent | delivered | ok | lost | recovered | duplicated | redelivered | reordered | gaps | unacked | delivery |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for s in report.streams.prefix(rowLimit * 5) {
            out.append(row(ReportText.stream(s.stream, receiver: s.receiver), s.direction.rawValue, s.counts))
        }
        if report.streams.count > rowLimit * 5 { out.append("| … \(report.streams.count - rowLimit * 5) more streams | | | | | | | | | | | | |") }
        out.append(row("**total**", "", t))
        out.append("")
        if t.retained > 0 {
            out += [
                "\(t.retained) retained message(s) sent again on a new subscription, to a receiver that already had them, "
                    + "are counted as `retained`, not as duplicates.", "",
            ]
        }
        out += [Self.deliveredMeaning, ""]
        out += section("Faults injected (\(report.faults.count))", faults(report))
        out += section("What people did", Self.manualLines(report.manual ?? []))
        out += section("Recovery", recovery(report))
        if let events = report.protocolEvents { out += section("Protocol events", Self.protocolLines(events)) }
        if let path = report.path { out += section("Mobile path", pathLines(path)) }
        let anomalyTotal = report.anomalyCounts.values.reduce(Int64(0)) { $0.addingReportingOverflow($1).overflow ? .max : $0 + $1 }
        out += section("First anomalies (\(anomalyTotal) in all)", anomalies(report), open: report.verdict != .pass)
        if let comparison { out += ["### Compared with the baseline", ""] + comparison.markdownLines() + [""] }
        out += ["### Reproduce", "", "```sh", report.replay, "```", ""]
        if report.verdict == .fail, let runFolder, report.failures?.contains(where: { !$0.faults.isEmpty }) == true {
            if flavor == .github {
                // In CI the run folder is gone with the runner: the chaos GitHub Action uploads its bundle.
                let bundle = URL(fileURLWithPath: runFolder).lastPathComponent + ".tar.gz"
                out += [
                    "Shrink it to the fewest faults that still fail this way (a scenario with a `pair:`): download the job's "
                        + "`\(bundle)` (the chaos action uploads it as the `chaos-bundle` artifact; elsewhere `chaos bundle \(runFolder)` "
                        + "makes it), then:",
                    "", "```sh", "chaos shrink \(bundle)", "```", "",
                ]
            } else {
                out += [
                    "Shrink it to the fewest faults that still fail this way (a scenario with a `pair:`):", "", "```sh",
                    "chaos shrink \(runFolder)", "```", "",
                ]
            }
        }
        return out.joined(separator: "\n")
    }

    private func mark(_ ok: Bool) -> String {
        flavor == .github ? (ok ? "✅" : "❌") : (ok ? "✓" : "✗")
    }

    /// A finding worth a look that does not fail the run by itself.
    private var warning: String {
        flavor == .github ? "⚠️" : "⚠"
    }

    private func verdictLine(_ report: RunReport) -> String {
        let t = report.totals
        let word = report.verdict.rawValue.uppercased()
        let icon = flavor == .github ? (report.verdict == .pass ? "✅ " : report.verdict == .fail ? "❌ " : "⚠️ ") : ""
        return "## \(icon)chaos \(word): \(report.scenario) (seed \(report.seed)): \(ReportText.count(t.ok)) ok, "
            + "\(ReportText.count(t.lost)) lost, \(ReportText.count(t.duplicated)) duplicated, delivery \(ReportText.percent(t.deliveryRatio))"
    }

    /// What "delivered" means, under the delivery table (readers of a pull request should not have to guess).
    static let deliveredMeaning =
        "*Delivered* = the consumer's TCP acknowledged the message's last byte (or had it when the "
        + "proxy itself reset the connection), not merely written by the proxy; *sent* = read by the proxy from the producer. "
        + "*ok* also counts a message a TLS consumer's TCP took after its close_notify, or past its last ack on a connection that ended in a reset, "
        + "once the consumer's own ack vouched for it or a resend reached it. "
        + "Limit: a consumer that sends no acks and closes its socket with unread data its kernel already acknowledged counts as having received it."

    private func row(_ stream: String, _ direction: String, _ c: DeliveryCounts) -> String {
        let cells = [c.sent, c.delivered, c.ok, c.lost, c.recovered, c.duplicated, c.redelivered, c.reordered, c.gaps, c.unacked]
        return "| \(stream) | \(direction) | " + cells.map(ReportText.count).joined(separator: " | ")
            + " | \(ReportText.percent(c.deliveryRatio)) |"
    }

    private func section(_ title: String, _ body: [String], open: Bool = true) -> [String] {
        guard !body.isEmpty else { return [] }
        if flavor == .github, !open || body.count > 15 {
            return ["<details><summary><b>\(title)</b></summary>", ""] + body + ["", "</details>", ""]
        }
        return ["### \(title)", ""] + body + [""]
    }

    private func faults(_ report: RunReport) -> [String] {
        guard !report.faults.isEmpty else { return [] }
        var lines = ["| # | at | fault | for | connections | parameters | reconnect | resume |", "|--:|--:|---|--:|--:|---|--:|--:|"]
        for f in report.faults.prefix(rowLimit) {
            lines.append(
                "| \(f.occurrence) | \(ReportText.clock(f.atS)) | \(f.kind) | \(f.forS > 0 ? ReportText.seconds(f.forS) : "") | "
                    + "\(f.connections)\(f.openedWhileOn.map { $0 > 0 ? " (+\($0) new)" : "" } ?? "")\(f.touchedNothing ? " \(warning)" : "") | \(ReportText.detail(f.detail)) | \(f.reconnectS.map(ReportText.seconds) ?? "") | "
                    + "\(f.resumeS.map(ReportText.seconds) ?? "") |"
            )
        }
        if report.faults.count > rowLimit { lines.append("| … | | \(report.faults.count - rowLimit) more | | | | | |") }
        return lines + deadPaths(report)
    }

    /// What the ends' TCPs met on the faults' dead paths, a row per fault that made any (``DeadPathTable``).
    private func deadPaths(_ report: RunReport) -> [String] {
        let rows = DeadPathTable.rows(report, limit: rowLimit)
        guard !rows.isEmpty else { return [] }
        let columns = DeadPathTable.columns
        let alignment = columns.indices.map { index in index == 0 ? "--:" : DeadPathTable.textColumns.contains(index) ? "---" : "--:" }
        return ["", DeadPathTable.caption, "", "| " + columns.joined(separator: " | ") + " |", "|" + alignment.joined(separator: "|") + "|"]
            + rows.map { "| " + $0.joined(separator: " | ") + " |" }
    }

    /// What people did through the control API while the run ran (the live page's buttons), one line each.
    static func manualLines(_ actions: [ManualAction]) -> [String] {
        actions.map { action in
            "- \(ReportText.clock(action.atS)) \(action.action.rawValue)" + (action.detail.map { ": `\($0)`" } ?? "")
        }
    }

    private func recovery(_ report: RunReport) -> [String] {
        let r = report.recovery
        var lines = ["| measure | count | p50 | p95 | p99 | max |", "|---|--:|--:|--:|--:|--:|"]
        for (name, summary) in [
            ("reconnect (fault → next connection)", r.reconnectS), ("resume (fault → first new message)", r.resumeS),
            ("half-open until the pair noticed", r.halfOpenS), ("transit through the proxy", r.transitS),
        ] {
            lines.append(
                "| \(name) | \(summary.count) | \(ReportText.seconds(summary.p50)) | \(ReportText.seconds(summary.p95)) | "
                    + "\(ReportText.seconds(summary.p99)) | \(ReportText.seconds(summary.max)) |"
            )
        }
        if r.neverResumed > 0 { lines += ["", "\(mark(false)) \(r.neverResumed) interrupted stream(s) never delivered a new message afterwards."] }
        for h in r.missedHalfOpens {
            let window = r.noticedWithinS.map { "; it noticed others within \(ReportText.seconds($0))" } ?? "; it noticed none in this run"
            lines.append(
                "\(warning) \(h.kind) #\(h.occurrence): the pair never noticed \(h.unnoticed) of \(h.connections) half-open connection(s) (longest \(ReportText.seconds(h.longestS))\(window))."
            )
        }
        for s in r.reconnectSpread where s.herd {
            lines.append(
                "\(warning) thundering herd after \(s.kind) #\(s.occurrence): \(s.densest) of \(s.attempts) reconnect attempts within \(ReportText.seconds(s.windowS))."
            )
        }
        return lines
    }

    private func pathLines(_ path: PathSummary) -> [String] {
        var lines = ["| measure | value |", "|---|--:|"]
        if let tail = path.radioTailS {
            let each = path.radioPromotions > 0 ? ", \(ReportText.seconds(path.radioPromotionS / Double(path.radioPromotions))) each" : ""
            lines.append(
                "| radio promotions waited for (tail \(ReportText.seconds(tail))) | \(path.radioPromotions), \(ReportText.seconds(path.radioPromotionS)) in all\(each) |"
            )
        }
        if let timeout = path.natIdleTimeoutS {
            lines.append(
                "| connections a NAT forgot (idle timeout \(ReportText.seconds(timeout))) | \(path.natExpired), \(path.natNoticed) noticed by the pair |"
            )
            if path.natNoticedS.count > 0 {
                lines.append(
                    "| NAT death → the pair noticed (p50 / max) | \(ReportText.seconds(path.natNoticedS.p50)) / \(ReportText.seconds(path.natNoticedS.max)) |"
                )
            }
        }
        if path.retransmissions > 0 {
            lines.append("| retransmission stalls | \(path.retransmissions), \(ReportText.seconds(path.retransmissionStallS)) in all |")
        }
        if path.quietGapS.count > 0 {
            lines.append(
                "| the pair's longest quiet gap per connection (its keepalive; p50 / max) | \(ReportText.seconds(path.quietGapS.p50)) / \(ReportText.seconds(path.quietGapS.max)) |"
            )
        }
        for finding in path.findings { lines += ["", "\(warning) \(finding)"] }
        let touched = path.connections.filter { $0.natExpiredAtS != nil || $0.radioPromotions > 0 || $0.retransmissions > 0 }
        if !touched.isEmpty {
            lines += ["", "| connection | radio promotions | retransmission stalls | NAT forgot it at | noticed after |", "|--:|--:|--:|--:|--:|"]
            for c in touched.prefix(rowLimit) {
                lines.append(
                    "| \(c.connection) | \(c.radioPromotions) (\(ReportText.seconds(c.radioPromotionS))) | "
                        + "\(c.retransmissions) (\(ReportText.seconds(c.retransmissionStallS))) | \(c.natExpiredAtS.map(ReportText.clock) ?? "") | "
                        + "\(c.natNoticedAfterS.map(ReportText.seconds) ?? (c.natExpiredAtS == nil ? "" : "never")) |"
                )
            }
        }
        return lines
    }

    private func anomalies(_ report: RunReport) -> [String] {
        guard !report.anomalies.isEmpty else { return [] }
        var lines = ["| at | class | stream | direction | seqs | fault | detail |", "|--:|---|---|---|---|---|---|"]
        for a in report.anomalies.prefix(rowLimit) {
            let detail = (a.detail ?? "").replacingOccurrences(of: "|", with: "\\|")
            lines.append(
                "| \(ReportText.clock(a.atS)) | \(a.kind.rawValue) | \(ReportText.stream(a.stream, receiver: a.receiver)) | \(a.direction.rawValue) | \(ReportText.seqs(a)) | "
                    + "\(ReportText.fault(a)) | \(detail) |"
            )
        }
        if report.anomalies.count > rowLimit { lines += ["", "… and \(report.anomalies.count - rowLimit) more in report.json."] }
        return lines
    }

    /// The protocol events, generically: the non-zero counters on one line, then each family seen (its counts,
    /// its note, its counts per fault), as the protocol plug-ins name them.
    static func protocolLines(_ p: ProtocolStats) -> [String] {
        let counters = ProtocolStats.knownCounters.filter { p[counter: $0.name] != 0 }.map { "\($0.title) \(p[counter: $0.name])" }
        var lines = ["- " + (counters.isEmpty ? "no protocol events counted" : counters.joined(separator: ", "))]
        for family in ProtocolStats.knownFamilies where !p[family: family.name].isEmpty {
            lines.append("- \(family.title): \(counts(p[family: family.name]))" + (family.note.map { " (\($0))" } ?? ""))
            lines += byFault(p[familyByFault: family.name], what: "\(family.title) ")
        }
        if let rtt = p.pingRoundTripS {
            lines.append(
                "- keepalive round trips (a ping to its answer): \(rtt.count), p50 \(ReportText.seconds(rtt.p50)), p99 \(ReportText.seconds(rtt.p99)), max \(ReportText.seconds(rtt.max))"
            )
        }
        return lines
    }

    private static func counts(_ byCode: [String: Int64]) -> String {
        byCode.isEmpty ? "none" : byCode.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", ")
    }

    private static func byFault(_ table: [String: [String: Int64]], what: String = "") -> [String] {
        table.sorted { $0.key < $1.key }.map { "  - \(what)during or after `\($0.key)`: " + counts($0.value) }
    }
}
