import ChaosCapture
import ChaosCore
import ChaosReport
import Foundation

/// `chaos bundle`: one `.tar.gz` that hands a failed run over (to a colleague, from CI to a laptop): what
/// `chaos replay` and `chaos shrink` need (scenario.json, timeline.json, report.json), the reports, the tails of the
/// pair's logs, the capture's slice around the failures (with the TLS key log it needs), the chaos version, and a
/// README with the commands. `chaos replay` and `chaos shrink` take the bundle as they take the folder.
package enum RunBundle {
    /// The files a bundle must hold to be replayed.
    static let required = ["scenario.json", "timeline.json", "report.json"]
    /// Copied whole when the run folder has them.
    static let whole = ["report.md", "report.html", "junit.xml", "scenario.yaml", "repeat-summary.md"]
    /// How much of the end of each pair log is kept.
    static let logTailBytes = 256 * 1024
    /// The capture slice reaches this far before the earliest fault a failure names, and after the last failure.
    static let sliceMarginS = 5.0

    /// Whether `path` names a bundle (a file ending in `.tar.gz` or `.tgz`) rather than a run folder.
    package static func isBundle(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { return false }
        return path.hasSuffix(".tar.gz") || path.hasSuffix(".tgz")
    }

    /// Writes the bundle of run folder `folder` to `out` (made by `tar -czf`); returns what went in, one line each.
    @discardableResult
    package static func make(from folder: String, to out: String, version: String) throws -> [String] {
        let source = URL(fileURLWithPath: folder)
        for name in required where !FileManager.default.fileExists(atPath: source.appendingPathComponent(name).path) {
            throw ChaosError.badInput("\(folder) is not a finished run folder: \(name) is missing")
        }
        let reportData = try Data(contentsOf: source.appendingPathComponent("report.json"))
        let report = try RunReport.decode(reportData, source: source.appendingPathComponent("report.json").path)
        let name = source.standardizedFileURL.lastPathComponent
        let staging = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-bundle-\(UUID().uuidString)")
        let root = staging.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: staging) }
        var contents: [String] = []
        for file in required + whole where FileManager.default.fileExists(atPath: source.appendingPathComponent(file).path) {
            try FileManager.default.copyItem(at: source.appendingPathComponent(file), to: root.appendingPathComponent(file))
            contents.append(file)
        }
        contents += try copyLogTails(from: source, to: root)
        contents += try sliceCapture(of: report, from: source, to: root)
        try Data((version + "\n").utf8).write(to: root.appendingPathComponent("VERSION"))
        try Data(readme(report: report, name: name, version: version).utf8).write(to: root.appendingPathComponent("README.md"))
        contents += ["VERSION", "README.md"]
        let outURL = URL(fileURLWithPath: out)
        try FileManager.default.createDirectory(at: outURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try tar(["-czf", outURL.path, "-C", staging.path, name], what: "writing \(out)")
        return contents
    }

    /// The run folder inside bundle `path`, unpacked into a new temporary folder. A file tar cannot read, or one
    /// without a run inside, is bad input naming it.
    package static func unpack(_ path: String) throws -> String {
        let target = FileManager.default.temporaryDirectory.appendingPathComponent(unpackedPrefix + UUID().uuidString)
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        do {
            return try unpack(path, into: target)
        } catch {
            try? FileManager.default.removeItem(at: target)
            throw error
        }
    }

    /// Unpacks the bundle `path` into `target`; returns its run folder.
    private static func unpack(_ path: String, into target: URL) throws -> String {
        do {
            try tar(["-xzf", path, "-C", target.path, "--no-same-owner"], what: "bundle \(path)")
        } catch let error as ChaosError {
            throw ChaosError.badInput("\(path) is not a readable chaos bundle: \(error.message)")
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: target.path)) ?? []
        guard entries.count == 1, let folder = entries.first.map({ target.appendingPathComponent($0).path }) else {
            throw ChaosError.badInput("\(path) is not a chaos bundle: it should hold one run folder, it holds \(entries.count) entries")
        }
        for name in required where !FileManager.default.fileExists(atPath: URL(fileURLWithPath: folder).appendingPathComponent(name).path) {
            throw ChaosError.badInput("\(path) is not a chaos bundle: \(name) is missing from it")
        }
        return folder
    }

    /// The run folder a command reads: `path` itself, or the run inside the bundle `path` names.
    package static func runFolder(_ path: String) throws -> String {
        isBundle(path) ? try unpack(path) : path
    }

    /// Removes what ``unpack(_:)`` made for `folder` once a command is done with it (nothing for a folder it did not
    /// unpack).
    package static func discard(unpacked folder: String) {
        let parent = URL(fileURLWithPath: folder).deletingLastPathComponent()
        guard parent.lastPathComponent.hasPrefix(unpackedPrefix),
            parent.deletingLastPathComponent().standardizedFileURL == FileManager.default.temporaryDirectory.standardizedFileURL
        else { return }
        try? FileManager.default.removeItem(at: parent)
    }

    /// The name of the temporary folders bundles are unpacked into.
    static let unpackedPrefix = "chaos-unbundled-"

    /// The last ``logTailBytes`` of each pair log (`*.out`, `*.err`, `*.jsonl`, `*.log` but the key log) in `logs/`.
    static func copyLogTails(from source: URL, to root: URL) throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: source.path)) ?? []
        let logs = names.filter { name in
            name != "keys.log" && [".out", ".err", ".jsonl", ".log"].contains { name.hasSuffix($0) }
        }.sorted()
        guard !logs.isEmpty else { return [] }
        let folder = root.appendingPathComponent("logs")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var copied: [String] = []
        for name in logs {
            guard let handle = FileHandle(forReadingAtPath: source.appendingPathComponent(name).path) else { continue }
            defer { try? handle.close() }
            let size = (try? handle.seekToEnd()) ?? 0
            let start = size > UInt64(logTailBytes) ? size - UInt64(logTailBytes) : 0
            try handle.seek(toOffset: start)
            var tail = (try? handle.readToEnd()) ?? Data()
            // Start at a line: the first one was cut.
            if start > 0, let newline = tail.firstIndex(of: UInt8(ascii: "\n")) { tail = tail[(newline + 1)...] }
            try tail.write(to: folder.appendingPathComponent(name))
            copied.append("logs/\(name)" + (start > 0 ? " (its last \(tail.count) bytes)" : ""))
        }
        return copied
    }

    /// The run's capture (`capture.pcap`, or the ring's `capture-NNN.pcap`) from ``sliceMarginS`` before the earliest
    /// fault a failure names to ``sliceMarginS`` after the last failure, as `capture-slice.pcap`, with `keys.log` when
    /// the run had one. Nothing when the run had no capture or no failure.
    static func sliceCapture(of report: RunReport, from source: URL, to root: URL) throws -> [String] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: source.path)) ?? [])
            .filter { $0 == "capture.pcap" || ($0.hasPrefix("capture-") && $0.hasSuffix(".pcap")) }.sorted()
        let failures = report.failures ?? []
        guard !names.isEmpty, !failures.isEmpty, let started = Self.epochSeconds(report.startedAt) else { return [] }
        let faultTimes = Dictionary(report.faults.map { ($0.occurrence, $0.atS) }, uniquingKeysWith: min)
        let earliest = failures.flatMap { $0.faults.compactMap { faultTimes[$0] } }.min() ?? failures.map(\.atS).min()!
        let latest = failures.map(\.atS).max()!
        // report.json's start is to the second: one more second either way.
        let from = Int64((started + earliest - sliceMarginS - 1) * 1e9)
        let through = Int64((started + latest + sliceMarginS + 1) * 1e9)
        var written: [String] = []
        for (index, name) in names.enumerated() {
            let slice = names.count == 1 ? "capture-slice.pcap" : "capture-slice-\(index).pcap"
            let count = try CaptureSlice.write(
                from: source.appendingPathComponent(name).path,
                to: root.appendingPathComponent(slice).path,
                from: from,
                through: through
            )
            if count == 0 {
                try? FileManager.default.removeItem(at: root.appendingPathComponent(slice))
            } else {
                let span = String(format: "%.1fs to %.1fs", earliest - sliceMarginS, latest + sliceMarginS)
                written.append("\(slice) (\(count) packets of \(name), \(span) of the run)")
            }
        }
        if !written.isEmpty, FileManager.default.fileExists(atPath: source.appendingPathComponent("keys.log").path) {
            try FileManager.default.copyItem(at: source.appendingPathComponent("keys.log"), to: root.appendingPathComponent("keys.log"))
            written.append("keys.log")
        }
        return written
    }

    /// Seconds since the Unix epoch of an ISO 8601 time (`2026-11-28T13:06:37Z`).
    static func epochSeconds(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }

    /// The bundle's README: what the run was, and the two commands.
    static func readme(report: RunReport, name: String, version: String) -> String {
        let bundle = "\(name).tar.gz"
        var lines = [
            "# chaos bundle: \(report.scenario), seed \(report.seed)",
            "",
            "A run of chaos \(version), started \(report.startedAt): verdict **\(report.verdict.rawValue)**"
                + (report.verdictReason.map { " (\($0))" } ?? "") + ".",
            "",
        ]
        if let first = report.failures?.first { lines += ["First failure: \(first.account)", ""] }
        lines += [
            "Run the same faults again (the pair's commands are in scenario.json; run from the folder they expect):",
            "",
            "```sh",
            "chaos replay \(bundle)",
            "```",
            "",
            "Shrink it to the fewest faults in the shortest run that still fail the same way:",
            "",
            "```sh",
            "chaos shrink \(bundle)",
            "```",
            "",
            "report.md is the run's report; logs/ the end of each of the pair's logs; capture-slice.pcap (when the run "
                + "captured) the packets around the failures (`chaos audit capture-slice.pcap --protocol-from scenario.json`, "
                + "or Wireshark with keys.log for TLS).",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// Runs `tar` with `arguments`; a failure is an i/o error quoting tar.
    static func tar(_ arguments: [String], what: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["tar"] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { throw ChaosError(.io, "\(what): cannot run tar: \(error.localizedDescription)") }
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: message, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw ChaosError(.io, "\(what): tar exited \(process.terminationStatus): \(text)")
        }
    }
}
