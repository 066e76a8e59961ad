import ChaosAudit
import ChaosCore
import Foundation

/// Renders a report as one self-contained HTML page (inline CSS and SVG, nothing fetched from the network):
/// a timeline with faults as bands, the delivered message rate, reconnects and anomalies as marks, then the tables.
package struct HTMLRenderer: Sendable {
    /// Creates a renderer.
    package init() {}

    static let faultColors: [String: String] = [
        "disconnect": "#d62728", "latency": "#ff7f0e", "bandwidth": "#bcbd22", "partition": "#9467bd", "handoff": "#1f77b4",
        "refuse": "#8c564b", "slice": "#e377c2", "stall": "#7f7f7f", "loss": "#aec7e8", "mtu": "#ffbb78", "radio": "#98df8a", "nat": "#c5b0d5",
        "link": "#17becf", "handshake": "#393b79",
    ]
    static let anomalyColors: [String: String] = [
        "gap": "#d62728", "lost": "#a50f15", "duplicated": "#ff7f0e", "redelivered": "#2ca02c", "reordered": "#9467bd",
        "truncated": "#8c564b", "framing": "#000000", "undecodable": "#7f7f7f", "unconfirmed": "#bcbd22", "seq jump": "#e377c2",
        "protocol": "#17becf", "oversized": "#aec7e8",
    ]

    /// The HTML text.
    package func render(_ report: RunReport, comparison: ReportComparison? = nil) -> String {
        let verdictClass = report.verdict.rawValue
        var html = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <title>chaos \(e(report.verdict.rawValue.uppercased())): \(e(report.scenario))</title>
            <style>
            body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fff}
            h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
            .verdict{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:700}
            .pass{background:#2e7d32}.fail{background:#c62828}.inconclusive{background:#6a1b9a}.error{background:#ef6c00}
            table{border-collapse:collapse;margin:4px 0 12px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
            th{background:#f5f5f5}td.l,th.l{text-align:left}.bad{color:#c62828;font-weight:600}.ok{color:#2e7d32}
            .legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}
            svg text{font:11px system-ui,sans-serif;fill:#444} code{background:#f5f5f5;padding:1px 4px}
            </style></head><body>
            <h1><span class="verdict \(verdictClass)">\(e(report.verdict.rawValue.uppercased()))</span> \(e(report.scenario)) <small>seed \(report.seed)</small></h1>
            <p>\(e(report.verdictReason ?? "")) Started \(e(report.startedAt)), ran \(e(ReportText.seconds(report.elapsedS)))\(report.complete ? "" : " (checkpoint)").
            \(ReportText.count(report.totals.ok)) ok, \(ReportText.count(report.totals.lost)) lost, \(ReportText.count(report.totals.duplicated)) duplicated,
            delivery \(e(ReportText.percent(report.totals.deliveryRatio))); \(report.faults.count) faults, \(report.connections.opened) connections.</p>
            \(reasonsList(report))<h2>Timeline</h2>

            """
        html += timeline(report)
        html += legend(report)
        html += failuresList(report)
        if let manual = report.manual, !manual.isEmpty {
            html +=
                "<h2>What people did</h2><ul id=manual>"
                + manual.map { "<li>\(e(ReportText.clock($0.atS))) \($0.action.rawValue)\($0.detail.map { ": <code>\(e($0))</code>" } ?? "")</li>" }
                .joined() + "</ul>\n"
        }
        html += tables(report, comparison: comparison)
        html += "<h2>Reproduce</h2><p><code>\(e(report.replay))</code></p>\n</body></html>\n"
        return html
    }

    /// The failures, each tied to the faults before it (the first hundred).
    private func failuresList(_ report: RunReport) -> String {
        guard let failures = report.failures, !failures.isEmpty else { return "" }
        let more = failures.count > 100 ? "<p>… and \(failures.count - 100) more in report.json.</p>" : ""
        return "<h2>Failures (\(failures.count))</h2><ol id=failures>" + failures.prefix(100).map { "<li>\(e($0.account))</li>" }.joined()
            + "</ol>\(more)\n"
    }

    /// What the run judged too little of, and the faults that touched nothing, each on a line of its own.
    private func reasonsList(_ report: RunReport) -> String {
        let items = (report.inconclusive ?? []) + report.unfiredFaults.prefix(20).map { "\($0.kind) #\($0.occurrence) touched no connection" }
        guard !items.isEmpty else { return "" }
        return "<ul class=bad>" + items.map { "<li>\(e($0))</li>" }.joined() + "</ul>\n"
    }

    /// `text` escaped for HTML text and attribute values.
    func e(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    func n(_ value: Double) -> String { String(format: "%.1f", value) }

    private func timeline(_ report: RunReport) -> String {
        let activity = report.activity
        let faultEnd = report.faults.map { $0.atS + $0.forS }.max() ?? 0
        let span = ReportText.bounded(max(1, report.elapsedS, faultEnd, Double(activity.delivered.count) * activity.bucketS))
        let left = 70.0
        let width = 1000.0
        let kinds = Array(Set(report.faults.map(\.kind))).sorted()
        let laneHeight = 16.0
        let faultTop = 24.0
        let rateTop = faultTop + Double(max(kinds.count, 1)) * laneHeight + 12
        let rateHeight = 150.0
        let connTop = rateTop + rateHeight + 14
        let connHeight = 34.0
        let anomalyTop = connTop + connHeight + 14
        let anomalyHeight = 22.0
        let height = anomalyTop + anomalyHeight + 30
        func x(_ seconds: Double) -> Double { left + seconds / span * width }
        var svg = [
            "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(left + width + 20))\" height=\"\(Int(height))\" "
                + "viewBox=\"0 0 \(Int(left + width + 20)) \(Int(height))\" role=\"img\" aria-label=\"run timeline\">"
        ]
        svg.append("<rect x=\"0\" y=\"0\" width=\"\(Int(left + width + 20))\" height=\"\(Int(height))\" fill=\"#fff\"/>")
        // Fault bands across the whole chart, faintly, then one lane per kind.
        for f in report.faults {
            let color = Self.faultColors[f.kind] ?? "#999"
            let bandWidth = max(1.5, f.forS / span * width)
            svg.append(
                "<rect x=\"\(n(x(f.atS)))\" y=\"\(n(rateTop))\" width=\"\(n(bandWidth))\" height=\"\(n(anomalyTop + anomalyHeight - rateTop))\" fill=\"\(color)\" opacity=\"0.10\"/>"
            )
            let lane = Double(kinds.firstIndex(of: f.kind) ?? 0)
            svg.append(
                "<rect class=\"fault\" x=\"\(n(x(f.atS)))\" y=\"\(n(faultTop + lane * laneHeight + 2))\" width=\"\(n(bandWidth))\" "
                    + "height=\"\(n(laneHeight - 4))\" fill=\"\(color)\"><title>\(e("\(f.kind) #\(f.occurrence) at \(ReportText.clock(f.atS)) for \(ReportText.seconds(f.forS)) \(ReportText.detail(f.detail))"))</title></rect>"
            )
        }
        for (index, kind) in kinds.enumerated() {
            svg.append("<text x=\"\(n(left - 6))\" y=\"\(n(faultTop + Double(index) * laneHeight + 12))\" text-anchor=\"end\">\(e(kind))</text>")
        }
        // Message rate.
        let rates = activity.delivered.map { Double($0) / max(activity.bucketS, 1e-9) }
        let peak = max(rates.max() ?? 0, 1)
        svg.append("<rect x=\"\(n(left))\" y=\"\(n(rateTop))\" width=\"\(n(width))\" height=\"\(n(rateHeight))\" fill=\"none\" stroke=\"#ddd\"/>")
        if !rates.isEmpty {
            var path = "M\(n(x(0))),\(n(rateTop + rateHeight))"
            for (index, rate) in rates.enumerated() {
                let y = rateTop + rateHeight - rate / peak * (rateHeight - 6)
                path += " L\(n(x(Double(index) * activity.bucketS))),\(n(y)) L\(n(x(Double(index + 1) * activity.bucketS))),\(n(y))"
            }
            path += " L\(n(x(Double(rates.count) * activity.bucketS))),\(n(rateTop + rateHeight)) Z"
            svg.append("<path id=\"rate\" d=\"\(path)\" fill=\"#4c78a8\" fill-opacity=\"0.35\" stroke=\"#4c78a8\" stroke-width=\"1\"/>")
        }
        svg.append("<text x=\"\(n(left - 6))\" y=\"\(n(rateTop + 10))\" text-anchor=\"end\">\(e(Self.short(peak)))/s</text>")
        svg.append("<text x=\"\(n(left - 6))\" y=\"\(n(rateTop + rateHeight / 2))\" text-anchor=\"end\">messages</text>")
        // Reconnects (accepted, up) and refusals (down).
        let connMid = connTop + connHeight / 2
        let connPeak = Double(max(activity.opened.max() ?? 0, activity.refused.max() ?? 0, 1))
        svg.append("<line x1=\"\(n(left))\" x2=\"\(n(left + width))\" y1=\"\(n(connMid))\" y2=\"\(n(connMid))\" stroke=\"#ccc\"/>")
        for (index, count) in activity.opened.enumerated() where count > 0 {
            let h = max(2, Double(count) / connPeak * (connHeight / 2))
            svg.append(
                "<rect class=\"reconnect\" x=\"\(n(x(Double(index) * activity.bucketS)))\" y=\"\(n(connMid - h))\" width=\"\(n(max(1.5, activity.bucketS / span * width)))\" height=\"\(n(h))\" fill=\"#2ca02c\"><title>\(count) connection(s) accepted at \(ReportText.clock(Double(index) * activity.bucketS))</title></rect>"
            )
        }
        for (index, count) in activity.refused.enumerated() where count > 0 {
            let h = max(2, Double(count) / connPeak * (connHeight / 2))
            svg.append(
                "<rect x=\"\(n(x(Double(index) * activity.bucketS)))\" y=\"\(n(connMid))\" width=\"\(n(max(1.5, activity.bucketS / span * width)))\" height=\"\(n(h))\" fill=\"#8c564b\"><title>\(count) refused</title></rect>"
            )
        }
        svg.append("<text x=\"\(n(left - 6))\" y=\"\(n(connMid + 4))\" text-anchor=\"end\">connects</text>")
        // Anomalies.
        for a in report.anomalies where a.kind != .lost {
            let color = Self.anomalyColors[a.kind.rawValue] ?? "#000"
            svg.append(
                "<circle class=\"anomaly\" cx=\"\(n(x(a.atS)))\" cy=\"\(n(anomalyTop + anomalyHeight / 2))\" r=\"4\" fill=\"\(color)\" fill-opacity=\"0.8\"><title>\(e("\(a.kind.rawValue) \(ReportText.stream(a.stream, receiver: a.receiver)) \(a.direction.rawValue) \(ReportText.seqs(a)) at \(ReportText.clock(a.atS)), \(ReportText.fault(a))"))</title></circle>"
            )
        }
        svg.append("<text x=\"\(n(left - 6))\" y=\"\(n(anomalyTop + anomalyHeight / 2 + 4))\" text-anchor=\"end\">anomalies</text>")
        // Failures: a red line through the whole chart at each (the first hundred), its account as the title.
        for failure in (report.failures ?? []).prefix(100) {
            svg.append(
                "<line class=\"failure\" x1=\"\(n(x(failure.atS)))\" x2=\"\(n(x(failure.atS)))\" y1=\"\(n(faultTop))\" "
                    + "y2=\"\(n(anomalyTop + anomalyHeight))\" stroke=\"#c62828\" stroke-width=\"1.5\" stroke-dasharray=\"3,2\">"
                    + "<title>\(e(failure.account))</title></line>"
            )
        }
        // Time axis.
        let axisY = anomalyTop + anomalyHeight + 8
        svg.append("<line x1=\"\(n(left))\" x2=\"\(n(left + width))\" y1=\"\(n(axisY))\" y2=\"\(n(axisY))\" stroke=\"#888\"/>")
        let step = Self.niceStep(span / 10)
        var tick = 0.0
        while tick <= span + 1e-9 {
            svg.append("<line x1=\"\(n(x(tick)))\" x2=\"\(n(x(tick)))\" y1=\"\(n(axisY))\" y2=\"\(n(axisY + 4))\" stroke=\"#888\"/>")
            svg.append("<text x=\"\(n(x(tick)))\" y=\"\(n(axisY + 16))\" text-anchor=\"middle\">\(e(ReportText.seconds(tick)))</text>")
            tick += step
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    static func niceStep(_ raw: Double) -> Double {
        let candidates: [Double] = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400]
        // Past a day: whole days, by powers of ten, so that there are never more than about ten ticks.
        return candidates.first { $0 >= raw } ?? 86400 * pow(10, (log10(raw / 86400)).rounded(.up))
    }

    static func short(_ value: Double) -> String {
        value >= 1e6 ? String(format: "%.1fM", value / 1e6) : value >= 1e3 ? String(format: "%.1fk", value / 1e3) : String(format: "%.0f", value)
    }

    private func legend(_ report: RunReport) -> String {
        var items = Set(report.faults.map(\.kind)).sorted().map {
            "<span><i style=\"background:\(Self.faultColors[$0] ?? "#999")\"></i>\(e($0))</span>"
        }
        items.append("<span><i style=\"background:#4c78a8;opacity:.5\"></i>messages delivered per second</span>")
        items.append("<span><i style=\"background:#2ca02c\"></i>connections accepted</span>")
        items.append("<span><i style=\"background:#8c564b\"></i>refused</span>")
        items += Set(report.anomalies.map(\.kind.rawValue)).sorted().map {
            "<span><i style=\"background:\(Self.anomalyColors[$0] ?? "#000");border-radius:6px\"></i>\(e($0))</span>"
        }
        return "<div class=\"legend\">" + items.joined() + "</div>\n"
    }

    private func tables(_ report: RunReport, comparison: ReportComparison?) -> String {
        var out = ""
        if !report.expectations.isEmpty {
            out += "<h2>Expectations</h2><table><tr><th class=l>expectation</th><th>expected</th><th>actual</th><th>result</th></tr>"
            for x in report.expectations {
                out +=
                    "<tr><td class=l>\(e(x.name))</td><td>\(e(x.expected))</td><td>\(e(x.actual))</td><td class=\(x.ok ? "ok" : "bad")>\(x.ok ? "pass" : "fail")</td></tr>"
            }
            out += "</table>\n"
        }
        out += deliverySection(report)
        let r = report.recovery
        out += "<h2>Recovery</h2><table><tr><th class=l>measure</th><th>count</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>"
        for (name, s) in [("reconnect", r.reconnectS), ("resume", r.resumeS), ("half-open", r.halfOpenS), ("transit", r.transitS)] {
            out +=
                "<tr><td class=l>\(name)</td><td>\(s.count)</td><td>\(ReportText.seconds(s.p50))</td><td>\(ReportText.seconds(s.p95))</td><td>\(ReportText.seconds(s.p99))</td><td>\(ReportText.seconds(s.max))</td></tr>"
        }
        out += "</table>\n" + recoveryHistogram(report) + deadPathTable(report)
        if let events = report.protocolEvents {
            out +=
                "<h2>Protocol events</h2><ul>"
                + MarkdownRenderer.protocolLines(events).map {
                    "<li>\(e(String($0.drop { $0 == " " || $0 == "-" }).replacingOccurrences(of: "`", with: "")))</li>"
                }.joined() + "</ul>\n"
        }
        if !report.anomalies.isEmpty {
            out +=
                "<h2>First anomalies</h2><table><tr><th>at</th><th class=l>class</th><th class=l>stream</th><th class=l>direction</th><th>seqs</th><th class=l>fault</th><th class=l>detail</th></tr>"
            for a in report.anomalies.prefix(50) {
                out +=
                    "<tr><td>\(ReportText.clock(a.atS))</td><td class=l>\(a.kind.rawValue)</td><td class=l>\(e(ReportText.stream(a.stream, receiver: a.receiver)))</td><td class=l>\(a.direction.rawValue)</td><td>\(ReportText.seqs(a))</td><td class=l>\(e(ReportText.fault(a)))</td><td class=l>\(e(a.detail ?? ""))</td></tr>"
            }
            out += "</table>\n"
        }
        if let comparison {
            out += "<h2>Compared with \(e(comparison.baseline))</h2><table><tr><th class=l>figure</th><th>baseline</th><th>now</th><th></th></tr>"
            for row in comparison.rows {
                out +=
                    "<tr><td class=l>\(row.figure)</td><td>\(RunReport.format(row.baseline, for: row.figure))</td><td>\(RunReport.format(row.current, for: row.figure))</td><td class=\(row.worse ? "bad" : "ok")>\(row.worse ? "worse" : "")</td></tr>"
            }
            out += "</table>\n"
        }
        return out
    }
}
