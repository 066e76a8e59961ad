import Foundation
import Testing

/// A run's report.html opened in Debian's headless Chromium as a person opens it (the DevTools driver of
/// ``LivePageTests``): the page as drawn says what report.json says (the verdict, a row per stream-direction, a band
/// per fault, an item per failure), and a screenshot is kept in .build/test-artifacts/.
enum ReportPageInBrowser {
    static func check(_ folder: URL, artifact: String) async throws {
        #expect(LivePageTests.browser != nil, "opening report.html needs Debian's chromium (make deps installs it)")
        guard LivePageTests.browser != nil else { return }
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("report.json"))) as? [String: Any]
        )
        try FileManager.default.createDirectory(atPath: LivePageTests.artifacts, withIntermediateDirectories: true)
        let values = try await LivePageTests.drive(
            [
                ["navigate": folder.appendingPathComponent("report.html").absoluteString],
                ["eval": "document.querySelector('h1 .verdict').textContent", "as": "verdict"],
                ["eval": "document.querySelectorAll('#streams tbody tr').length", "as": "rows"],
                ["eval": "document.querySelectorAll('rect.fault').length", "as": "bands"],
                ["eval": "document.querySelectorAll('#failures li').length", "as": "failures"],
                ["screenshot": "\(LivePageTests.artifacts)/\(artifact)"],
            ],
            folder: folder.path
        )
        let verdict = (json["verdict"] as? String ?? "?").uppercased()
        #expect(values["verdict"] as? String == verdict, "the page's verdict \(values["verdict"] ?? "?") vs \(verdict)")
        let streams = (json["streams"] as? [Any])?.count ?? -1
        #expect((values["rows"] as? NSNumber)?.intValue == min(streams, 200), "rows \(values["rows"] ?? "?") vs \(streams) stream-directions")
        let faults = (json["faults"] as? [Any])?.count ?? -1
        #expect((values["bands"] as? NSNumber)?.intValue == faults, "fault bands \(values["bands"] ?? "?") vs \(faults) faults")
        let failures = (json["failures"] as? [Any])?.count ?? 0
        #expect((values["failures"] as? NSNumber)?.intValue == min(failures, 100), "failures \(values["failures"] ?? "?") vs \(failures)")
        #expect(FileManager.default.fileExists(atPath: "\(LivePageTests.artifacts)/\(artifact)"), "the screenshot is kept")
    }
}
