import ChaosAudit
import ChaosCore
import ChaosReport
import Foundation
import Testing

/// A report.json from a damaged folder (or a soak longer than any clock) renders in every format without a trap
/// or a runaway timeline.
@Suite("Reports with absurd numbers")
struct DamagedReportTests {
    @Test(
        "infinite and 1e300 durations, Int64.max counts and recovery values render in every format",
        arguments: [
            Double.infinity, 1e300, Double(Int64.max), -Double.infinity, Double.nan,
        ]
    )
    func absurdNumbers(value: Double) throws {
        var report = try ReportFixtures.report(skip: [50])
        report.elapsedS = value
        report.faults[0].forS = value
        report.faults[1].atS = value
        report.recovery.reconnectS.max = value
        report.recovery.resumeS.p99 = value
        report.anomalies[0].atS = value
        report.anomalyCounts = ["lost": .max, "gap": .max, "redelivered": .max]
        report.totals.lost = .max
        report.totals.deliveryRatio = value
        let folder = ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try report.write(toDirectory: folder)
        let loaded = try RunReport.load(fromDirectory: folder)
        let markdown = MarkdownRenderer().render(loaded)
        #expect(markdown.hasPrefix("## chaos FAIL"))
        let html = HTMLRenderer().render(loaded)
        #expect(html.count < 2_000_000, "the timeline's ticks stay few (\(html.count) characters)")
        #expect(JUnitRenderer().render(loaded).contains("<testsuite"))
    }
}
