package import ChaosCore
import ChaosProtocols
package import Foundation

/// The folder of one run: `Reports/<scenario>-<UTC time>/` unless `--out` names one. Holds the
/// scenario as run, the timeline, the pair's output and the reports.
package struct RunFolder: Sendable {
    /// The folder.
    package let url: URL

    /// Creates (or reuses) the folder.
    package init(scenario: String, out: String?, now: Date = Date()) throws {
        if let out {
            url = URL(fileURLWithPath: out)
        } else {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
            url = URL(fileURLWithPath: "Reports").appendingPathComponent("\(scenario)-\(formatter.string(from: now))")
        }
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw ChaosError(.badInput, "cannot create the run folder \(url.path): \(error.localizedDescription)")
        }
    }

    /// Saves what `chaos replay` needs: the scenario as run and its drawn timeline.
    package func saveReplayInputs(scenario: Scenario, timeline: Timeline) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(scenario).write(to: url.appendingPathComponent("scenario.json"), options: .atomic)
        try encoder.encode(timeline).write(to: url.appendingPathComponent("timeline.json"), options: .atomic)
    }

    /// Saves the timeline again (with the pauses the run had: ``Timeline/pauses``).
    package func saveTimeline(_ timeline: Timeline) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(timeline).write(to: url.appendingPathComponent("timeline.json"), options: .atomic)
    }

    /// Loads what an earlier run saved for replay.
    package static func loadReplayInputs(from directory: String) throws -> (Scenario, Timeline) {
        let base = URL(fileURLWithPath: directory)
        let decoder = JSONDecoder()
        // A plug-in's fault comes back with its fields in its declaration's order.
        decoder.userInfo[FramingCatalog.userInfoKey] = ProtocolRegistry.catalog
        func load<T: Decodable>(_ name: String, as type: T.Type) throws -> T {
            let path = base.appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ChaosError.badInput("\(directory) is not a run folder: \(name) is missing")
            }
            do { return try decoder.decode(T.self, from: data) } catch {
                throw ChaosError.badInput("\(path) is not readable: \(error)")
            }
        }
        let scenario = try load("scenario.json", as: Scenario.self)
        let timeline = try load("timeline.json", as: Timeline.self)
        // The same rules as a scenario file: a damaged folder is bad input, not a trap mid-run.
        try scenario.checkInvariants(source: base.appendingPathComponent("scenario.json").path)
        let timelinePath = base.appendingPathComponent("timeline.json").path
        try timeline.checkInvariants(against: scenario, source: timelinePath)
        return (scenario, try timeline.completed(from: scenario, source: timelinePath))
    }
}
