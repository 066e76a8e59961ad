import Foundation

/// Renders a report as JUnit XML for CI test tabs: one test case per expectation; a failure carries the
/// actual value. A run that could not be judged gets one `run` test case with an error.
package struct JUnitRenderer: Sendable {
    /// Creates a renderer.
    package init() {}

    /// The XML text.
    package func render(_ report: RunReport) -> String {
        let suite = "chaos.\(report.scenario)"
        let inconclusive = report.verdict == .inconclusive ? report.inconclusive ?? [] : []
        let failures = report.expectations.filter { !$0.ok }.count + (inconclusive.isEmpty ? 0 : 1)
        let judged = report.verdict != .error
        let tests = report.expectations.count + (judged ? 0 : 1) + (inconclusive.isEmpty ? 0 : 1)
        let errors = judged ? 0 : 1
        let time = String(format: "%.3f", report.elapsedS)
        var lines = [
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
            "<testsuites name=\"chaos\" tests=\"\(tests)\" failures=\"\(failures)\" errors=\"\(errors)\" time=\"\(time)\">",
            "  <testsuite name=\(q(suite)) tests=\"\(tests)\" failures=\"\(failures)\" errors=\"\(errors)\" skipped=\"0\" "
                + "time=\"\(time)\" timestamp=\(q(report.startedAt))>",
            "    <properties>",
            "      <property name=\"seed\" value=\"\(report.seed)\"/>",
            "      <property name=\"verdict\" value=\(q(report.verdict.rawValue))/>",
            "      <property name=\"complete\" value=\"\(report.complete)\"/>",
            "      <property name=\"replay\" value=\(q(report.replay))/>",
            "    </properties>",
        ]
        if !judged {
            lines.append("    <testcase classname=\(q(suite)) name=\"run\" time=\"\(time)\">")
            lines.append("      <error message=\(q(report.verdictReason ?? "the run could not be judged")) type=\"error\"/>")
            lines.append("    </testcase>")
        }
        if !inconclusive.isEmpty {
            // First: the run judged too little, whatever its expectations say.
            lines.append("    <testcase classname=\(q(suite)) name=\"judged something\" time=\"\(time)\">")
            lines.append(
                "      <failure message=\(q(inconclusive[0])) type=\"inconclusive\">"
                    + escape(inconclusive.joined(separator: "\n") + "\nreproduce: \(report.replay)") + "</failure>"
            )
            lines.append("    </testcase>")
        }
        for e in report.expectations {
            let name = "\(e.name) \(e.expected)"
            if e.ok {
                lines.append("    <testcase classname=\(q(suite)) name=\(q(name)) time=\"0\"/>")
            } else {
                lines.append("    <testcase classname=\(q(suite)) name=\(q(name)) time=\"0\">")
                lines.append(
                    "      <failure message=\(q("\(e.name) is \(e.actual), expected \(e.expected)")) type=\"expectation\">"
                        + escape("expected: \(e.expected)\nactual: \(e.actual)\nreproduce: \(report.replay)") + "</failure>"
                )
                lines.append("    </testcase>")
            }
        }
        lines += ["  </testsuite>", "</testsuites>", ""]
        return lines.joined(separator: "\n")
    }

    private func q(_ text: String) -> String { "\"" + escape(text) + "\"" }

    /// XML text with the five special characters escaped and control characters dropped.
    func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n": out += "&#10;"
            case "\t", "\r": out.unicodeScalars.append(scalar)
            default: if scalar.value >= 0x20 { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }
}
