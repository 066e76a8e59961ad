import Foundation

/// What the demo pair's own JSONL logs say it processed: the ground truth a run's audit is checked against.
///
/// The server's log (`server.jsonl`) holds the upstream messages it processed, each client's log
/// (`client-N.jsonl`) the downstream messages that client processed; both hold event lines too
/// (`{"t":…,"event":"connected",…}`), which are kept for diagnostics.
struct GroundTruthLog {
    /// One logical stream in one direction, as the audit keys it.
    struct Key: Hashable, Comparable, CustomStringConvertible {
        var stream: String
        var direction: String

        static func < (a: Key, b: Key) -> Bool { (a.stream, a.direction) < (b.stream, b.direction) }
        var description: String { "\(stream)/\(direction)" }
    }

    /// Processed seqs per stream and direction, in log order (repeats kept).
    private(set) var processed: [Key: [Int]] = [:]
    /// Every event line, decoded.
    private(set) var events: [[String: Any]] = []

    /// Reads every `*.jsonl` log of the pair in `folder` (server.jsonl and client-N.jsonl).
    init(folder: URL) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".jsonl") && ($0 == "server.jsonl" || $0.hasPrefix("client-")) }.sorted()
        for name in names { try read(folder.appendingPathComponent(name)) }
    }

    private mutating func read(_ url: URL) throws {
        let text = try String(contentsOf: url, encoding: .utf8)
        for line in text.split(separator: "\n") {
            // A process killed mid-write could leave a torn last line; the demo writes whole lines, so none is expected.
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            if object["event"] != nil {
                events.append(object)
            } else if let stream = object["stream"] as? String, let direction = object["dir"] as? String,
                let seq = object["seq"] as? Int
            {
                processed[Key(stream: stream, direction: direction == "up" ? "upstream" : "downstream"), default: []]
                    .append(seq)
            }
        }
    }

    /// Every stream and direction that processed at least one message.
    var keys: [Key] { processed.keys.sorted() }

    /// The distinct seqs processed on `key`.
    func distinct(_ key: Key) -> Set<Int> { Set(processed[key] ?? []) }

    /// The highest seq processed on `key` (0 when none).
    func highest(_ key: Key) -> Int { processed[key]?.max() ?? 0 }

    /// Seqs below the highest processed one that the consumer never processed.
    func holes(_ key: Key) -> [Int] {
        let seen = distinct(key)
        let top = highest(key)
        return top == 0 ? [] : (1...top).filter { !seen.contains($0) }
    }

    /// Events named `name`.
    func events(named name: String) -> [[String: Any]] {
        events.filter { $0["event"] as? String == name }
    }
}
