import ChaosCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The ground truth of the demo pair: one JSONL line per processed message
/// (`{"t":<unix ms>,"dir":"up","stream":"c1","seq":7}`) plus lines for gaps and connection events
/// (`{"t":…,"event":"connected",…}`), so a test can compare the audit's verdict with what really happened.
///
/// Each line is written with one `write(2)` to a file opened with `O_APPEND`, as it happens: a killed process leaves
/// a complete log. Safe from any thread: a lock keeps a line from meeting another one or the close (the gRPC client's
/// tasks log from several threads; a fresh-clone run found its last line cut at byte 24,576 as it stopped).
final class ProcessedLog: Sendable {
    /// The file's descriptor; -1 once closed or when there is no log.
    private let descriptor: Mutex<Int32>

    /// A log appending to `path`, or a no-op log when `path` is nil.
    init(path: String?) throws {
        guard let path else {
            descriptor = Mutex(-1)
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ChaosError(.io, "cannot open log file '\(path)' for writing") }
        descriptor = Mutex(fd)
    }

    /// Logs a processed data message.
    func processed(direction: String, stream: String, seq: Int) {
        write(#"{"t":\#(Self.now()),"dir":"\#(direction)","stream":\#(Self.quoted(stream)),"seq":\#(seq)}"#)
    }

    /// Logs, as a producer stops, the seqs of `direction` it still holds unacknowledged: one
    /// `{"event":"unacknowledged","dir":…,"stream":…,"from":…,"to":…}` line per run of consecutive seqs. A seq the audit
    /// counts lost must be one of them that the consumer's log never processed.
    func unacknowledged(direction: String, stream: String, seqs: [Int]) {
        var index = seqs.startIndex
        while index < seqs.endIndex {
            var last = index
            while last + 1 < seqs.endIndex, seqs[last + 1] == seqs[last] + 1 { last += 1 }
            event("unacknowledged", ["dir": direction, "stream": stream, "from": seqs[index], "to": seqs[last]])
            index = last + 1
        }
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

    /// Closes the file; later lines are dropped.
    func close() {
        descriptor.withLock { fd in
            if fd >= 0 { _ = Glibc.close(fd) }
            fd = -1
        }
    }

    private func write(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
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
