import ChaosAudit

/// The report's table of what each end's TCP met on the faults' dead paths (``DeadPathFigures``), a row per fault
/// occurrence that made any: the same caption, columns and cells in report.md and report.html.
enum DeadPathTable {
    /// The line above the table.
    static let caption = "What each end's TCP met while the path was dead (from the proxy's legs):"
    /// The column names; the first four and the last are text, the others counts.
    static let columns = [
        "#", "fault", "path", "connections", "sent into it: client / server", "acknowledged to them", "proxy's retransmissions",
        "closed first: client / server / neither",
    ]
    /// The columns read as text (left-aligned).
    static let textColumns: Set<Int> = [1, 2, 7]

    /// The rows of the first `limit` faults of `report` that made dead paths (none when no fault did).
    static func rows(_ report: RunReport, limit: Int) -> [[String]] {
        report.faults.prefix(limit).compactMap { fault in
            guard let d = fault.deadPath else { return nil }
            return [
                "\(fault.occurrence)", fault.kind, d.inKernel ? "dropped in the kernel" : "held in the proxy", "\(d.connections)",
                "\(ReportText.bytes(d.client.sentBytes)) / \(ReportText.bytes(d.server.sentBytes))",
                ReportText.bytes(d.client.acknowledgedToThemBytes + d.server.acknowledgedToThemBytes),
                "\(d.client.proxyRetransmissions + d.server.proxyRetransmissions)",
                "\(d.client.closedFirst) / \(d.server.closedFirst) / \(d.neitherClosed)",
            ]
        }
    }
}

extension HTMLRenderer {
    /// What each end's TCP met on the faults' dead paths (``DeadPathTable``), or nothing when no fault made one.
    func deadPathTable(_ report: RunReport) -> String {
        let rows = DeadPathTable.rows(report, limit: 200)
        guard !rows.isEmpty else { return "" }
        func cells(_ values: [String], tag: String) -> String {
            values.enumerated().map { index, value in
                "<\(tag)\(DeadPathTable.textColumns.contains(index) ? " class=l" : "")>\(e(value))</\(tag)>"
            }.joined()
        }
        return "<p>\(e(DeadPathTable.caption))</p><table id=dead-paths><tr>\(cells(DeadPathTable.columns, tag: "th"))</tr>"
            + rows.map { "<tr>\(cells($0, tag: "td"))</tr>" }.joined() + "</table>\n"
    }
}
