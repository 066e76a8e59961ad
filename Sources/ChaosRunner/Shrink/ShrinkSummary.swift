package import ChaosCore
package import Foundation

/// What `chaos shrink` found: `shrink.json` (every candidate, its runs and outcomes, the final failure rate, the time
/// spent), `shrink.md` in a few lines, and the reproducer as `repro/` (scenario.json and timeline.json, for `chaos
/// replay`) and `repro.yaml` (the original scenario file with the reproducer's faults at explicit times).
package struct ShrinkSummary: Sendable {
    let run: String
    let scenario: String
    let target: ShrinkTarget
    let original: (faults: Int, seconds: Double)
    let result: (candidate: ShrinkCandidate, rate: (failures: Int, runs: Int))?
    let trials: [Shrinker.Trial]
    let seconds: Double
    let budget: Double
    /// A candidate's time before its first fault and after its last one ends.
    let warmup: ChaosDuration
    let settle: ChaosDuration

    /// A summary of a shrink whose candidates ran `warmup` before their first fault and `settle` after the last.
    package init(
        run: String,
        scenario: String,
        target: ShrinkTarget,
        original: (faults: Int, seconds: Double),
        result: (candidate: ShrinkCandidate, rate: (failures: Int, runs: Int))?,
        trials: [Shrinker.Trial],
        seconds: Double,
        budget: Double,
        warmup: ChaosDuration,
        settle: ChaosDuration
    ) {
        self.run = run
        self.scenario = scenario
        self.target = target
        self.original = original
        self.result = result
        self.trials = trials
        self.seconds = seconds
        self.budget = budget
        self.warmup = warmup
        self.settle = settle
    }

    /// `shrink.json`.
    struct Record: Encodable {
        var schema = "chaos.shrink/1"
        var run: String
        var scenario: String
        var headline: String
        var target: ShrinkTarget
        var originalFaults: Int
        var originalSeconds: Double
        var seconds: Double
        var budgetSeconds: Double
        var trials: [Shrinker.Trial]
        var reproducer: Reproducer?
    }

    /// `shrink.json`'s `reproducer`: the original occurrences kept, their span, the final failure rate, how to run it.
    struct Reproducer: Encodable {
        var occurrences: [Int]
        var spanSeconds: Double
        var failures: Int
        var runs: Int
        var reproYaml: String?
        var replay: String

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(occurrences, forKey: .occurrences)
            try container.encode(spanSeconds, forKey: .spanSeconds)
            try container.encode(failures, forKey: .failures)
            try container.encode(runs, forKey: .runs)
            try container.encode(reproYaml, forKey: .reproYaml)  // null when the scenario file was not found
            try container.encode(replay, forKey: .replay)
        }

        enum CodingKeys: String, CodingKey { case occurrences, spanSeconds, failures, runs, reproYaml, replay }
    }

    /// How long a duration reads in a sentence: `72h`, `12m05s`, `42s`.
    static func span(_ seconds: Double) -> String {
        if seconds >= 3600 { return String(format: "%.0fh", seconds / 3600) }
        if seconds >= 60 { return String(format: "%dm%02ds", Int(seconds) / 60, Int(seconds) % 60) }
        return String(format: "%.0fs", seconds)
    }

    /// `72h, 12,448 faults → 42s, 2 faults: a partition, then a disconnect; fails 9 of 10`.
    package var headline: String {
        let before = "\(Self.span(original.seconds)), \(original.faults) fault\(original.faults == 1 ? "" : "s")"
        guard let (candidate, rate) = result else {
            let runs = trials.reduce(0) { $0 + $1.runs.count }
            return "\(before): did not reproduce in \(runs) run\(runs == 1 ? "" : "s") (\(Self.span(seconds)) of a \(Self.span(budget)) budget)"
        }
        let kinds = candidate.occurrences.map { "a \($0.occurrence.kind.rawValue)" }.joined(separator: ", then ")
        let runSeconds = warmup.seconds + candidate.span.seconds + settle.seconds
        return "\(before) → \(Self.span(runSeconds)), \(candidate.occurrences.count) fault"
            + "\(candidate.occurrences.count == 1 ? "" : "s"): \(kinds); fails \(rate.failures) of \(rate.runs)"
    }

    /// Writes shrink.json, shrink.md and, with a reproducer, repro/ and repro.yaml into `folder`.
    package func write(to folder: URL, scenario: Scenario, seed: UInt64) throws {
        var reproYAML: String?
        if let (candidate, _) = result {
            let timeline = candidate.timeline(seed: seed, warmup: warmup, settle: settle)
            let repro = try RunFolder(scenario: scenario.name, out: folder.appendingPathComponent("repro").path)
            try repro.saveReplayInputs(scenario: scenario, timeline: timeline)
            if let original = Self.scenarioText(scenario.file) {
                let header = [
                    "chaos shrink of \(run): \(headline).",
                    "Fails on \(target.account)",
                    "The exact reproducer (the same per-fault draws) is `chaos replay \(folder.appendingPathComponent("repro").path)`.",
                ]
                let text = ReproScenario.text(original: original, timeline: timeline, originals: candidate.originals, header: header)
                try Data((text + "\n").utf8).write(to: folder.appendingPathComponent("repro.yaml"))
                reproYAML = folder.appendingPathComponent("repro.yaml").path
            }
        }
        let record = Record(
            run: run,
            scenario: scenario.name,
            headline: headline,
            target: target,
            originalFaults: original.faults,
            originalSeconds: original.seconds,
            seconds: seconds,
            budgetSeconds: budget,
            trials: trials,
            reproducer: result.map { candidate, rate in
                Reproducer(
                    occurrences: candidate.originals,
                    spanSeconds: candidate.span.seconds,
                    failures: rate.failures,
                    runs: rate.runs,
                    reproYaml: reproYAML,
                    replay: "chaos replay \(folder.appendingPathComponent("repro").path)"
                )
            }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        try encoder.encode(record).write(to: folder.appendingPathComponent("shrink.json"))
        var lines = ["## chaos shrink: \(scenario.name)", "", headline + ".", "", "Failure kept: \(target.account)", ""]
        if let (candidate, _) = result {
            lines += ["| # in the failed run | fault | at (after a \(warmup) warm-up) | for | parameters |", "|--:|---|--:|--:|---|"]
            let first = candidate.occurrences.first?.occurrence.at ?? .zero
            for entry in candidate.occurrences {
                let occurrence = entry.occurrence
                lines.append(
                    "| \(entry.original) | \(occurrence.kind.rawValue) | \(warmup + (occurrence.at - first)) | \(occurrence.lasts) | "
                        + "\(occurrence.effect.summary) |"
                )
            }
            lines += [
                "", "Run it: `chaos replay \(folder.appendingPathComponent("repro").path)`" + (reproYAML.map { " or `chaos run \($0)`" } ?? "") + ".",
            ]
        }
        let runs = trials.reduce(0) { $0 + $1.runs.count }
        lines += ["", "\(trials.count) candidates, \(runs) runs, \(Self.span(seconds)) (budget \(Self.span(budget)))."]
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: folder.appendingPathComponent("shrink.md"))
    }

    /// The original scenario file's text: at its path, or under the current directory by that path's last two parts
    /// (a CI machine's checkout elsewhere).
    static func scenarioText(_ file: String) -> String? {
        guard !file.isEmpty else { return nil }
        let url = URL(fileURLWithPath: file)
        let candidates = [file, url.deletingLastPathComponent().lastPathComponent + "/" + url.lastPathComponent]
        for path in candidates { if let text = try? String(contentsOfFile: path, encoding: .utf8) { return text } }
        return nil
    }
}
