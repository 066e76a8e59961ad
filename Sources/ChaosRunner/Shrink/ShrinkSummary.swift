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

    /// A summary.
    package init(
        run: String,
        scenario: String,
        target: ShrinkTarget,
        original: (faults: Int, seconds: Double),
        result: (candidate: ShrinkCandidate, rate: (failures: Int, runs: Int))?,
        trials: [Shrinker.Trial],
        seconds: Double,
        budget: Double
    ) {
        self.run = run
        self.scenario = scenario
        self.target = target
        self.original = original
        self.result = result
        self.trials = trials
        self.seconds = seconds
        self.budget = budget
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
        return "\(before) → \(Self.span(candidate.span.seconds + 11)), \(candidate.occurrences.count) fault"
            + "\(candidate.occurrences.count == 1 ? "" : "s"): \(kinds); fails \(rate.failures) of \(rate.runs)"
    }

    /// Writes shrink.json, shrink.md and, with a reproducer, repro/ and repro.yaml into `folder`.
    package func write(to folder: URL, scenario: Scenario, seed: UInt64, warmup: ChaosDuration, settle: ChaosDuration) throws {
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
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        var object: [String: Any] = [
            "schema": "chaos.shrink/1", "run": run, "scenario": scenario.name, "headline": headline,
            "target": try JSONSerialization.jsonObject(with: encoder.encode(target)),
            "original_faults": original.faults, "original_seconds": original.seconds,
            "seconds": seconds, "budget_seconds": budget,
            "trials": try JSONSerialization.jsonObject(with: encoder.encode(trials)),
        ]
        if let (candidate, rate) = result {
            object["reproducer"] = [
                "occurrences": candidate.originals, "span_seconds": candidate.span.seconds,
                "failures": rate.failures, "runs": rate.runs, "repro_yaml": reproYAML.map { $0 as Any } ?? NSNull(),
                "replay": "chaos replay \(folder.appendingPathComponent("repro").path)",
            ]
        }
        let json = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        try json.write(to: folder.appendingPathComponent("shrink.json"))
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
