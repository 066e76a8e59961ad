import ArgumentParser
import ChaosCore
import ChaosReport
import Foundation

/// `chaos report DIR`: renders a finished (or checkpointed) run's report.json to stdout.
struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Render a finished or checkpointed run's report (reads DIR/report.json, prints to stdout).",
        discussion: "A failed verdict is rendered like any other (exit 0); a missing or garbled report is exit 2."
    )

    /// The output formats.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case markdown, github, json, junit, html
    }

    @Argument(help: "The run's folder (Reports/<scenario>-<time>/).")
    var directory: String

    @Option(name: .long, help: "Output format: \(Format.allCases.map(\.rawValue).joined(separator: ", ")).")
    var format: Format = .markdown

    @Option(name: .long, help: "A baseline run's folder: show what got worse.")
    var compare: String?

    func run() async throws {
        let report = try RunReport.load(fromDirectory: directory)
        let comparison = try compare.map { baseline in
            ReportComparison(current: report, baseline: try RunReport.load(fromDirectory: baseline), baselineName: baseline)
        }
        let text: String
        switch format {
        case .markdown: text = MarkdownRenderer(flavor: .plain).render(report, comparison: comparison)
        case .github: text = MarkdownRenderer(flavor: .github).render(report, comparison: comparison)
        case .html: text = HTMLRenderer().render(report, comparison: comparison)
        case .junit:
            guard comparison == nil else {
                throw ChaosError.badInput("--compare works with --format markdown, github, json or html, not junit")
            }
            text = JUnitRenderer().render(report)
        case .json:
            if let comparison {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                encoder.keyEncodingStrategy = .convertToSnakeCase
                text = String(decoding: try encoder.encode(comparison), as: UTF8.self) + "\n"
            } else {
                text = String(decoding: try report.jsonData(), as: UTF8.self) + "\n"
            }
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
