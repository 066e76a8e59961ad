import ChaosAudit
import ChaosCore
import ChaosReport
import Foundation
import Testing

/// `report.html` at a fleet's size, read as HTML and opened by a real browser (Debian's headless `chromium`): the worst
/// stream-directions first, one page of them as HTML, every one in the page's JSON, paged and searched by its script.
@Suite("report.html at any size, as a browser shows it")
struct ReportPageTests {
    /// The sample run with `count` stream-directions named `device-N`: one in 997 lost some messages (more for a higher
    /// N % 7), the rest clean.
    static func large(_ count: Int) throws -> RunReport {
        var report = try SampleRunTests.run()
        report.streams = (0..<count).map { index in
            var counts = DeliveryCounts()
            counts.sent = 100
            counts.delivered = 100
            counts.ok = 100
            if index % 997 == 13 {
                counts.lost = Int64(index % 7 + 1)
                counts.ok -= counts.lost
                counts.delivered -= counts.lost
            }
            counts.updateRatio()
            return StreamResult(
                stream: "device-\(index)",
                direction: index % 2 == 0 ? .upstream : .downstream,
                counts: counts,
                firstSeq: 1,
                highestSeq: 100,
                ackedUpTo: nil
            )
        }
        return report
    }

    /// The `<tr>` rows of the delivery table's body.
    static func bodyRows(_ html: String) -> [String] {
        guard let table = html.components(separatedBy: "<table id=streams>").dropFirst().first,
            let body = table.components(separatedBy: "<tbody>").dropFirst().first?.components(separatedBy: "</tbody>").first
        else { return [] }
        return body.components(separatedBy: "<tr>").dropFirst().map { String($0) }
    }

    @Test(
        "1,000 stream-directions: the worst first, one page of 200 as HTML, all 1,000 in the page's JSON, a name that could close the script escaped"
    )
    func worstFirstPaged() throws {
        var report = try Self.large(1_000)
        report.streams[500].stream = "</script><b>x"
        let html = HTMLRenderer().render(report)
        let rows = Self.bodyRows(html)
        #expect(rows.count == 200)
        // The worst: the stream with the most lost (device-13 here, the only one of the thousand).
        let lossy = report.streams.filter { $0.counts.lost > 0 }.sorted { $0.counts.lost > $1.counts.lost }
        #expect(!lossy.isEmpty)
        #expect(rows.first?.contains(">\(lossy[0].stream)<") == true, "\(rows.first ?? "")")
        let json = try #require(
            html.components(separatedBy: "<script type=\"application/json\" id=stream-rows>").dropFirst().first?
                .components(separatedBy: "</script>").first
        )
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[Any]])
        #expect(parsed.count == 1_000)
        #expect(parsed.contains { $0.first as? String == "</script><b>x" }, "the name survives, escaped")
        #expect(!html.contains("</script><b>x"), "no raw </script> from a stream's name")
        #expect(html.contains("<input id=stream-search"))
        // A small run has no pager and no JSON: its table is whole.
        let small = HTMLRenderer().render(try SampleRunTests.run())
        #expect(!small.contains("stream-rows") && !small.contains("stream-search"))
    }

    @Test("the recovery histogram counts each fault occurrence in the bucket of its recovery time")
    func recoveryHistogram() throws {
        let report = try SampleRunTests.run()
        let html = HTMLRenderer().render(report)
        #expect(html.contains("<svg id=recovery-histogram"))
        let resumes = report.faults.compactMap(\.resumeS)
        #expect(!resumes.isEmpty)
        let titles = html.components(separatedBy: "<title>resume (slowest stream) ").dropFirst().compactMap {
            $0.components(separatedBy: "</title>").first?.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        #expect(titles.reduce(0, +) == resumes.count, "every occurrence in one bucket: \(titles)")
        #expect([0.05, 0.1, 0.3, 1.5, 61].map(HTMLRenderer.bucket) == [0, 0, 1, 3, 8])
    }

    /// Debian's headless Chromium, or nil when it is not installed.
    static let browser = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// The DOM of `page` after its scripts ran, as headless Chromium dumps it.
    static func dumpDOM(_ page: URL) throws -> String {
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("chromium-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: profile) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(browser))
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)", "--virtual-time-budget=5000",
            "--dump-dom", page.absoluteString,
        ]
        // The DOM goes to a file (a pipe would fill with the page's megabytes of JSON while nobody reads it).
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        let dump = profile.appendingPathComponent("dom.html")
        _ = FileManager.default.createFile(atPath: dump.path, contents: nil)
        let output = try FileHandle(forWritingTo: dump)
        defer { try? output.close() }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Bounded: a browser that hangs is killed, and the test fails on what it wrote.
        let deadline = Date().addingTimeInterval(120)
        while process.isRunning, Date() < deadline { usleep(50_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return String(decoding: try Data(contentsOf: dump), as: UTF8.self)
    }

    @Test(
        "Chromium opens a 100,000 stream-direction report: its script pages the JSON (page 1 of 500), the worst first, and #stream=NAME opens on a search",
        .enabled(if: browser != nil, "needs Debian's chromium (make deps installs it)")
    )
    func chromiumOpensALargeReport() throws {
        let report = try Self.large(100_000)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("report-page-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let page = folder.appendingPathComponent("report.html")
        try Data(HTMLRenderer().render(report).utf8).write(to: page)
        let dom = try Self.dumpDOM(page)
        #expect(dom.contains("<span id=\"stream-page\">1 of 500 (100,000)</span>"), "the script ran and counted every row: \(dom.prefix(300))")
        let rows = Self.bodyRows(dom.replacingOccurrences(of: "<table id=\"streams\">", with: "<table id=streams>"))
        #expect(rows.count == 200, "one page drawn")
        let worst = try #require(report.streams.max { $0.counts.lost < $1.counts.lost })
        #expect(rows.first?.contains(">\(worst.stream)<") == true, "the worst first: \(rows.first ?? "")")
        // A link to a search: it runs as the page opens (a substring: device-4242 and device-42420 to -42429).
        var components = URLComponents(url: page, resolvingAgainstBaseURL: false)!
        components.fragment = "stream=device-4242"
        let searched = try Self.dumpDOM(try #require(components.url))
        #expect(searched.contains("<span id=\"stream-page\">1 of 1 (11)</span>"), "\(searched.prefix(300))")
        #expect(searched.contains(">device-4242<") && searched.contains(">device-42429<") && !searched.contains(">device-4243<"))
    }
}
