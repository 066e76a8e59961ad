import ArgumentParser
import ChaosCore
import ChaosReport
import ChaosRunner
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
    var directory: String?

    @Option(
        name: .long,
        parsing: .upToNextOption,
        help: "Merge these agents' run folders (chaos run --agent) into one audit and report, written to --out and rendered."
    )
    var merge: [String] = []

    @Option(help: "With --merge: the merged run's folder (default: Reports/<scenario>-merged-<UTC time>/).")
    var out: String?

    @Option(name: .customLong("api-token-file"), help: "With --merge of agent URLs: the file holding the agents' bearer token.")
    var apiTokenFile: String?

    @Option(name: .customLong("clock-offset"), help: "With --merge: AGENT=DURATION, how far that agent's clock was ahead (250ms, -1.5s); subtracted.")
    var clockOffsets: [String] = []

    func validate() throws {
        if merge.isEmpty {
            guard directory != nil else { throw ValidationError("give a run's folder, or --merge DIR… to merge a fleet's agents") }
            if out != nil || !clockOffsets.isEmpty || apiTokenFile != nil {
                throw ValidationError("--out, --clock-offset and --api-token-file go with --merge")
            }
        } else if directory != nil {
            throw ValidationError("give either a run's folder or --merge DIR…, not both")
        }
        _ = try offsets()
    }

    /// The merge's folders: each `http://HOST:PORT` fetched first (``AgentDownload``) into OUT/agents/N (or a temporary
    /// folder), the others as given.
    func fetchAgents() throws -> [String] {
        let urls = merge.filter { $0.hasPrefix("http://") || $0.hasPrefix("https://") }
        guard !urls.isEmpty else { return merge }
        let token = try apiTokenFile.map { path -> String in
            guard let data = FileManager.default.contents(atPath: path) else { throw ChaosError.badInput("--api-token-file \(path): cannot read it") }
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let base = out.map { "\($0)/agents" } ?? NSTemporaryDirectory() + "chaos-merge-\(UUID().uuidString)"
        return try merge.enumerated().map { index, entry in
            guard entry.hasPrefix("http://") || entry.hasPrefix("https://") else { return entry }
            let folder = "\(base)/\(index + 1)"
            FileHandle.standardError.write(Data("fetching \(entry) into \(folder)\n".utf8))
            try AgentDownload.fetch(url: entry, token: token, into: folder)
            return folder
        }
    }

    /// `--clock-offset AGENT=DURATION` as agent → nanoseconds.
    func offsets() throws -> [String: Int64] {
        var offsets: [String: Int64] = [:]
        for text in clockOffsets {
            let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
            let negative = parts.count == 2 && parts[1].hasPrefix("-")
            guard parts.count == 2, !parts[0].isEmpty,
                let duration = ChaosDuration(parsing: negative ? String(parts[1].dropFirst()) : parts[1])
            else {
                throw ValidationError("--clock-offset must be AGENT=DURATION (such as b=250ms or b=-1.5s), found '\(text)'")
            }
            offsets[parts[0]] = negative ? -duration.nanoseconds : duration.nanoseconds
        }
        return offsets
    }

    @Option(name: .long, help: "Output format: \(Format.allCases.map(\.rawValue).joined(separator: ", ")).")
    var format: Format = .markdown

    @Option(name: .long, help: "A baseline run's folder: show what got worse.")
    var compare: String?

    func run() async throws {
        let report: RunReport
        if merge.isEmpty {
            report = try RunReport.load(fromDirectory: directory ?? "")
        } else {
            let command = "chaos report --merge " + merge.joined(separator: " ") + clockOffsets.map { " --clock-offset \($0)" }.joined()
            let merged = try FleetMerge.merge(folders: try fetchAgents(), out: out, clockOffsets: try offsets(), command: command)
            report = merged.report
            FileHandle.standardError.write(Data("merged \(merge.count) agent(s): \(merged.folder.path)\n".utf8))
        }
        let comparison = try compare.map { baseline in
            ReportComparison(current: report, baseline: try RunReport.load(fromDirectory: baseline), baselineName: baseline)
        }
        let text: String
        switch format {
        case .markdown: text = MarkdownRenderer(flavor: .plain, runFolder: merge.isEmpty ? directory : nil).render(report, comparison: comparison)
        case .github: text = MarkdownRenderer(flavor: .github, runFolder: merge.isEmpty ? directory : nil).render(report, comparison: comparison)
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
        // A merge judges the fleet's run: its exit says the verdict, as chaos run's does (a soak's Job fails with it).
        if !merge.isEmpty, report.verdict != .pass { throw ExitCode(report.verdict == .error ? 2 : 1) }
    }
}
