import Foundation

/// What a processed-message log (JSONL) says happened: for each stream, the seqs processed in order,
/// and the events (connected, gap-sent, gap-received, hole, …).
struct GroundTruth {
    /// Processed seqs per stream, in log order.
    var processed: [String: [Int]] = [:]
    /// Every event line, as decoded JSON objects.
    var events: [[String: Any]] = []

    init(path: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        for line in text.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            if object["event"] != nil {
                events.append(object)
            } else if let stream = object["stream"] as? String, let seq = object["seq"] as? Int {
                processed[stream, default: []].append(seq)
            }
        }
    }

    /// The seqs of `stream`, in the order they were processed.
    func seqs(_ stream: String) -> [Int] { processed[stream] ?? [] }

    /// True when `stream`'s seqs are exactly 1…n, each once, in order.
    func isExactlyOnceInOrder(_ stream: String) -> Bool {
        let seqs = seqs(stream)
        return seqs.isEmpty || seqs == Array(1...seqs.count)
    }

    /// Seqs below the highest processed one that were never processed.
    func holes(_ stream: String) -> [Int] {
        let seen = Set(seqs(stream))
        guard let top = seen.max() else { return [] }
        return (1...top).filter { !seen.contains($0) }
    }

    /// Events named `name`.
    func events(named name: String) -> [[String: Any]] {
        events.filter { $0["event"] as? String == name }
    }
}
