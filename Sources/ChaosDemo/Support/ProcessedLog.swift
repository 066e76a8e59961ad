import ChaosCore
import Foundation

/// The ground truth of the demo pair: one JSONL line per processed message
/// (`{"t":<unix ms>,"dir":"up","stream":"c1","seq":7}`) plus lines for gaps and connection events
/// (`{"t":…,"event":"connected",…}`), so a test can compare the audit's verdict with what really happened.
///
/// Each line is written with one `write(2)` as it happens: a killed process leaves a complete log.
/// Not thread-safe: its owner (an event-loop-confined engine) serialises every call.
final class ProcessedLog: Sendable {
    private let handle: FileHandle?

    /// A log appending to `path`, or a no-op log when `path` is nil.
    init(path: String?) throws {
        guard let path else {
            handle = nil
            return
        }
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw ChaosError(.io, "cannot create log file '\(path)'")
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw ChaosError(.io, "cannot open log file '\(path)' for writing")
        }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    /// Logs a processed data message.
    func processed(direction: String, stream: String, seq: Int) {
        write(#"{"t":\#(Self.now()),"dir":"\#(direction)","stream":\#(Self.quoted(stream)),"seq":\#(seq)}"#)
    }

    /// Logs an event with extra fields (values are strings or integers).
    func event(_ name: String, _ fields: KeyValuePairs<String, any Sendable> = [:]) {
        var line = #"{"t":\#(Self.now()),"event":\#(Self.quoted(name))"#
        for (key, value) in fields {
            line += "," + Self.quoted(key) + ":"
            switch value {
            case let number as Int: line += String(number)
            case let flag as Bool: line += flag ? "true" : "false"
            default: line += Self.quoted(String(describing: value))
            }
        }
        write(line + "}")
    }

    /// Closes the file.
    func close() {
        try? handle?.close()
    }

    private func write(_ line: String) {
        guard let handle else { return }
        try? handle.write(contentsOf: Data((line + "\n").utf8))
    }

    private static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// A JSON string literal for `text`.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
