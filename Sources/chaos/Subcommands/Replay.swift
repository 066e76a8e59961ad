import ArgumentParser
import ChaosCore
import ChaosReport
import ChaosRunner

/// `chaos replay DIR`: re-run the exact fault timeline of an earlier run.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-run the exact fault timeline (same seed, same schedule) of an earlier run folder."
    )

    @Argument(help: "The earlier run's folder (it holds scenario.json and timeline.json), or its bundle (chaos bundle).")
    var directory: String

    @Option(help: "The new run folder (default: Reports/<scenario>-<UTC time>/).")
    var out: String?

    @Option(help: "Only the faults of this window of the run's timeline (A..B, like 40s..70s), after a 3 s warm-up, then 10 s to settle.")
    var window: String?

    @Option(help: "Only the faults of the window before failure N of the report (report.json failures[]), as --window does.")
    var aroundFailure: Int?

    @Option(help: "With --around-failure: how far before the failure the window starts.")
    var before = "60s"

    @OptionGroup var relay: RelayOptions

    func validate() throws {
        if window != nil, aroundFailure != nil { throw ValidationError("--window and --around-failure both pick a window: give one") }
        if let window, case .failure = DurationRange.parse(window) {
            throw ValidationError("--window must be A..B with A before B, like 40s..70s, found '\(window)'")
        }
        if let aroundFailure, aroundFailure < 0 { throw ValidationError("--around-failure must be 0 or more, found \(aroundFailure)") }
        guard ChaosDuration(parsing: before).map({ $0.nanoseconds > 0 }) == true else {
            throw ValidationError("--before must be a duration like 60s, found '\(before)'")
        }
    }

    func run() async throws {
        let folder = try RunBundle.runFolder(directory)
        defer { RunBundle.discard(unpacked: folder) }
        var (scenario, timeline) = try RunFolder.loadReplayInputs(from: folder)
        var replay = "chaos replay \(directory)"
        if let range = try self.range(folder: folder) {
            let (windowed, originals) = ReplayWindow.timeline(timeline, window: range)
            Console.line(
                "window \(range.lowerBound)..\(range.upperBound) of the run: \(originals.count) fault(s)"
                    + (originals.isEmpty ? "" : " (#\(originals.map(String.init).joined(separator: ", #")))")
                    + ", after a \(ReplayWindow.warmup) warm-up"
            )
            timeline = windowed
            scenario.duration = windowed.duration
            replay += window.map { " --window \($0)" } ?? " --around-failure \(aroundFailure ?? 0) --before \(before)"
        }
        Console.line("replaying \(scenario.name) from \(directory): seed \(timeline.seed), \(timeline.count())")
        var configuration = ScenarioRunner.Configuration(
            scenario: scenario,
            timeline: timeline,
            out: out,
            replayCommand: replay,
            selfPath: ExecutablePath.current
        )
        relay.apply(to: &configuration)
        try await RunSummary.run(configuration)
    }

    /// The window on the run's timeline: `--window`, or the `--before` seconds up to failure `--around-failure`.
    func range(folder: String) throws -> ClosedRange<ChaosDuration>? {
        if let window, case .success(let range) = DurationRange.parse(window) { return range.lower...range.upper }
        guard let index = aroundFailure else { return nil }
        let report = try RunReport.load(fromDirectory: folder)
        let failures = report.failures ?? []
        guard failures.indices.contains(index) else {
            throw ChaosError.badInput("--around-failure \(index): \(directory)/report.json lists \(failures.count) failure(s)")
        }
        let origin = Double(report.extra?["timeline.origin_s"] ?? "") ?? 0
        let at = ChaosDuration.nanoseconds(Int64(max(0, failures[index].atS - origin) * 1e9))
        let start = ChaosDuration.nanoseconds(max(0, at.nanoseconds - ChaosDuration(parsing: before)!.nanoseconds))
        return start...at
    }
}
