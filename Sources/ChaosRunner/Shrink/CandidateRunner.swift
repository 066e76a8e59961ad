package import ChaosCore
package import ChaosReport
package import Foundation

/// Runs a shrink candidate as `chaos replay` in a child process (a fresh process per run: nothing of one run's pair,
/// ports or state leaks into the next) and reads its verdict.
package struct CandidateRunner: Sendable {
    /// What one run of a candidate showed.
    package struct Outcome: Sendable, Equatable, Codable {
        /// `pass`, `fail`, `inconclusive` or `error`.
        package var verdict: String
        /// Whether it failed the way the shrunk run did.
        package var reproduced: Bool
        /// Why it did not pass (its first reason).
        package var reason: String?
        /// How long it took, in seconds.
        package var seconds: Double
    }

    /// This chaos executable.
    let executable: String
    /// The scenario the run folder holds.
    let scenario: Scenario
    /// The failure to reproduce.
    let target: ShrinkTarget

    /// A runner of candidates of `scenario`, judged against `target`.
    package init(executable: String, scenario: Scenario, target: ShrinkTarget) {
        self.executable = executable
        self.scenario = scenario
        self.target = target
    }

    /// Runs `timeline` once in `folder` (made, and left with the run's report and log); throws only when the run could
    /// not be started at all.
    package func run(_ timeline: Timeline, in folder: URL) async throws -> Outcome {
        let inputs = try RunFolder(scenario: scenario.name, out: folder.path)
        try inputs.saveReplayInputs(scenario: scenario, timeline: timeline)
        let runFolder = folder.appendingPathComponent("run")
        let log = folder.appendingPathComponent("chaos.log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw ChaosError(.io, "cannot create \(log.path) for a candidate's run")
        }
        let handle = try FileHandle(forWritingTo: log)
        defer { try? handle.close() }
        let started = Date()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["replay", folder.path, "--out", runFolder.path]
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: ChaosError.badInput("cannot run \(executable): \(error.localizedDescription)"))
            }
        }
        let seconds = Date().timeIntervalSince(started)
        guard let data = FileManager.default.contents(atPath: runFolder.appendingPathComponent("report.json").path),
            let report = try? RunReport.decode(data, source: "report.json")
        else {
            return Outcome(verdict: "error", reproduced: false, reason: "exit \(status) without a report (see \(log.path))", seconds: seconds)
        }
        // Captures are the largest files and a shrink runs many candidates: only the report and logs stay.
        try? FileManager.default.removeItem(at: runFolder.appendingPathComponent("capture.pcap"))
        return Outcome(
            verdict: report.verdict.rawValue,
            reproduced: target.isReproduced(by: report),
            reason: report.verdictReason,
            seconds: seconds
        )
    }
}

/// The failure `chaos shrink` keeps: a failed run shows it again when it fails with a failure of the same kind.
package struct ShrinkTarget: Sendable, Equatable, Codable {
    /// `lost`, `duplicated`, `reordered`, `never_resumed`, `half_open_unnoticed`; nil: any failed run.
    package var kind: String?
    /// Its time on the original timeline (seconds since the timeline's start).
    package var atTimelineS: Double
    /// Its one-sentence account in the original report.
    package var account: String

    /// A target.
    package init(kind: String?, atTimelineS: Double, account: String) {
        self.kind = kind
        self.atTimelineS = atTimelineS
        self.account = account
    }

    /// Whether `report` shows the failure again: a failure of the same kind after one of the candidate's faults (one
    /// with no fault before it, such as a client that loses its first message at every start, is not this one).
    package func isReproduced(by report: RunReport) -> Bool {
        guard report.verdict == .fail else { return false }
        guard let kind else { return true }
        return report.failures?.contains { $0.kind == kind && !$0.faults.isEmpty } ?? false
    }
}
