import ArgumentParser
import ChaosCore
import ChaosReport
import ChaosRunner
import Foundation

/// `chaos shrink DIR`: from a failed run whose pair chaos starts, the fewest faults in the shortest run that still
/// fail the same way (repro.yaml, shrink.json, shrink.md).
struct Shrink: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Shrink a failed run to the fewest faults in the shortest run that still fail the same way.",
        discussion: """
            Re-runs the run's own pair (its scenario needs a pair: section) with a window of the faults before the \
            first failure, then fewer and shorter faults (delta debugging), each candidate as often as its failure \
            rate asks. Writes repro.yaml, repro/ (for chaos replay), shrink.json and shrink.md. Exit 0 with a \
            reproducer, 1 when the failure did not come back, 2 on bad input (a run that passed, no pair, a damaged \
            folder).
            """
    )

    @Argument(help: "The failed run's folder (it holds scenario.json, timeline.json and report.json), or its bundle (chaos bundle).")
    var directory: String

    @Option(help: "The time allowed (20m, 90s); the smallest reproducer found so far is kept when it runs out.")
    var budget = "20m"

    @Option(help: "Where the candidates and the reproducer go (default: DIR/shrink/, or NAME-shrink/ here for a bundle NAME.tar.gz).")
    var out: String?

    @Option(help: "Which failure of the report to keep (its index in report.json failures[]); default: the first that came after a fault.")
    var failure: Int?

    @Option(help: "Time from a candidate's start to its first fault: the pair connected and its streams flowing.")
    var warmup = "3s"

    @Option(help: "Time after a candidate's last fault ends, for the pair to recover (or not).")
    var settle = "8s"

    @Option(help: "Runs of the final reproducer that measure its failure rate.")
    var finalRuns = 10

    func validate() throws {
        guard let budget = ChaosDuration(parsing: budget), budget.nanoseconds > 0 else {
            throw ValidationError("--budget must be a duration like 20m or 90s, found '\(budget)'")
        }
        if let failure, failure < 0 { throw ValidationError("--failure must be 0 or more, found \(failure)") }
        for (flag, value) in [("--warmup", warmup), ("--settle", settle)] where ChaosDuration(parsing: value) == nil {
            throw ValidationError("\(flag) must be a duration like 3s or 500ms, found '\(value)'")
        }
        if !(1...1000).contains(finalRuns) { throw ValidationError("--final-runs must be from 1 to 1000, found \(finalRuns)") }
    }

    func run() async throws {
        let isBundle = RunBundle.isBundle(self.directory)
        let unpacked = try RunBundle.runFolder(self.directory)
        defer { RunBundle.discard(unpacked: unpacked) }
        let directory = try Self.runToShrink(unpacked, failure: failure)
        let (scenario, timeline) = try RunFolder.loadReplayInputs(from: directory)
        guard let data = FileManager.default.contents(atPath: URL(fileURLWithPath: directory).appendingPathComponent("report.json").path) else {
            throw ChaosError.badInput("\(directory) is not a finished run folder: report.json is missing")
        }
        let report = try RunReport.decode(data, source: "\(directory)/report.json")
        guard report.verdict == .fail else {
            throw ChaosError.badInput("nothing to shrink: the run's verdict is \(report.verdict.rawValue), not fail")
        }
        guard scenario.pair?.client != nil || scenario.pair?.server != nil else {
            throw ChaosError.badInput(
                "chaos shrink re-runs the pair, and \(scenario.name) has no pair: section: add one with the commands that start "
                    + "your server and client (docs/own-pair.md), run it, then shrink that run"
            )
        }
        let target = try Self.target(of: report, failure: failure)
        let budgetS = ChaosDuration(parsing: budget)!.seconds
        let defaultOut =
            isBundle
            ? URL(fileURLWithPath: directory).lastPathComponent + "-shrink"
            : URL(fileURLWithPath: directory).appendingPathComponent("shrink").path
        let folder = URL(fileURLWithPath: out ?? defaultOut)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var options = Shrinker.Options(out: folder, executable: ExecutablePath.current)
        options.budget = budgetS
        options.warmup = ChaosDuration(parsing: warmup)!
        options.settle = ChaosDuration(parsing: settle)!
        options.finalRuns = finalRuns
        let occurrences = Array(timeline.prefix { $0.at.seconds <= target.atTimelineS })
        Console.line("shrinking \(scenario.name): \(occurrences.count) faults before \(target.account)")
        let terminal = isatty(STDOUT_FILENO) != 0
        let shrinker = Shrinker(scenario: scenario, timeline: occurrences, target: target, options: options) { line in
            if terminal { Console.line(line) }
        }
        let result = try await shrinker.run()
        let summary = ShrinkSummary(
            run: self.directory,
            scenario: scenario.name,
            target: target,
            original: (faults: report.faults.count, seconds: report.elapsedS),
            result: result.map { ($0.candidate, $0.rate) },
            trials: shrinker.trials,
            seconds: shrinker.elapsed,
            budget: budgetS,
            warmup: options.warmup,
            settle: options.settle
        )
        try summary.write(to: folder, scenario: scenario, seed: scenario.seed ?? timeline.seed)
        Console.line(summary.headline)
        Console.line("shrink: \(folder.appendingPathComponent("shrink.md").path)")
        if result == nil { throw ExitCode(1) }
    }

    /// The run to shrink for `directory`: itself, or, for a fleet merged from agents that each drew their own timeline
    /// (`schedule: per-agent`, no one timeline), the run of the agent whose connection carried the failure to keep
    /// (`--failure`'s, else ``keptFailure(_:)``), whose faults are the ones that
    /// failure went through. That run's folder is where the merge read it (as given, or beside the merged folder); when
    /// it is not on this machine, bad input saying which to fetch.
    static func runToShrink(_ directory: String, failure index: Int? = nil) throws -> String {
        let folder = URL(fileURLWithPath: directory)
        guard !FileManager.default.fileExists(atPath: folder.appendingPathComponent("timeline.json").path),
            let report = try? RunReport.load(fromDirectory: directory),
            let agents = report.extra?["merge.agents"]?.components(separatedBy: ", ")
        else { return directory }
        guard report.verdict == .fail else {
            throw ChaosError.badInput("nothing to shrink: the run's verdict is \(report.verdict.rawValue), not fail")
        }
        let failures = report.failures ?? []
        let kept = index.flatMap { failures.indices.contains($0) ? failures[$0] : nil } ?? Self.keptFailure(failures)
        let connection = kept?.connection ?? 0
        let agentIndex = Int(connection / FleetMerge.connectionStride)
        let agent = agents.indices.contains(agentIndex) ? agents[agentIndex] : agents[0]
        let own = report.extra?["merge.agent.\(agent).folder"] ?? agent
        let candidates = [own, folder.deletingLastPathComponent().appendingPathComponent(URL(fileURLWithPath: own).lastPathComponent).path]
        let why = "\(directory) merges agents that each applied their own timeline (schedule: per-agent)"
        guard let found = candidates.first(where: { FileManager.default.fileExists(atPath: "\($0)/timeline.json") }) else {
            throw ChaosError.badInput(
                "\(why): the run of agent '\(agent)', whose connection carried the first failure, is what shrinks, and its folder "
                    + "(\(own)) is not here: copy it here and run chaos shrink FOLDER"
            )
        }
        Console.line("\(why): shrinking the run of agent '\(agent)', whose connection carried the first failure: \(found)")
        return found
    }

    /// The failure to keep: the report's `failures[index]`, or by default the first loss, duplicate, reorder or
    /// stream that never resumed that came after a fault (an unnoticed half-open is a finding a passing run shows
    /// too); any failure at the run's end when the report lists none. One with no fault before it is bad input: the
    /// pair fails without chaos, and there is nothing to shrink.
    static func target(of report: RunReport, failure index: Int?) throws -> ShrinkTarget {
        let origin = Double(report.extra?["timeline.origin_s"] ?? "") ?? 0
        let failures = report.failures ?? []
        let chosen: FailureRecord
        if let index {
            guard failures.indices.contains(index) else {
                throw ChaosError.badInput("--failure \(index): the report lists \(failures.count) failure(s) (report.json failures[])")
            }
            chosen = failures[index]
        } else {
            guard let first = Self.keptFailure(failures) else {
                return ShrinkTarget(
                    kind: nil,
                    atTimelineS: report.elapsedS - origin,
                    account: "the run's end (\(report.verdictReason ?? "it failed"))"
                )
            }
            chosen = first
        }
        guard !chosen.faults.isEmpty else {
            throw ChaosError.badInput("nothing to shrink: no fault came before \(chosen.account) The pair fails without chaos's faults.")
        }
        return ShrinkTarget(kind: chosen.kind, atTimelineS: chosen.atS - origin, account: chosen.account)
    }

    /// The failure a shrink keeps when `--failure` names none: the first loss, duplicate, reorder or stream that never
    /// resumed that came after a fault, else the first of them (an unnoticed half-open is a finding, not one of them);
    /// nil when the report lists none of them.
    static func keptFailure(_ failures: [FailureRecord]) -> FailureRecord? {
        let judged = failures.filter { $0.kind != "half_open_unnoticed" }
        return judged.first(where: { !$0.faults.isEmpty }) ?? judged.first
    }
}
