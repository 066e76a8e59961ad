import ChaosAudit
import ChaosCore
import Foundation

/// Small formatting helpers shared by the renderers.
enum ReportText {
    /// The longest time shown as a time (about 31,700 years); a report read from a damaged folder may say more.
    static let longest = 1e12

    /// `value` as a time to draw with: non-finite and absurd values held to 0...``longest``.
    static func bounded(_ value: Double) -> Double { value.isFinite ? min(max(value, 0), longest) : (value > 0 ? longest : 0) }

    static func seconds(_ value: Double) -> String {
        guard value.isFinite, value < longest else { return value.isNaN ? "?" : "∞" }
        if value >= 3600 { return String(format: "%dh%02dm%02ds", Int(value) / 3600, Int(value) / 60 % 60, Int(value) % 60) }
        if value >= 60 { return String(format: "%dm%02.0fs", Int(value) / 60, value.truncatingRemainder(dividingBy: 60)) }
        if value >= 10 { return String(format: "%.1fs", value) }
        if value >= 1 { return String(format: "%.2fs", value) }
        if value > 0 { return String(format: "%.1fms", value * 1000) }
        return "0s"
    }

    /// A stream as the reports name it: `fleet/7`, or `fleet/7 → sub-2` for a receiver's copy of a stream that fans
    /// out (a subscriber's).
    static func stream(_ name: String, receiver: String?) -> String {
        receiver.map { "\(name) → \($0)" } ?? name
    }

    static func clock(_ value: Double) -> String {
        guard value.isFinite, abs(value) < longest else { return value.isNaN ? "?" : "∞" }
        return value < 60
            ? String(format: "%.2fs", value)
            : String(format: "%d:%02d:%05.2f", Int(value) / 3600, Int(value) / 60 % 60, value.truncatingRemainder(dividingBy: 60))
    }

    static func count(_ value: Int64) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return (value < 0 ? "-" : "") + out
    }

    /// A byte count: `812 B`, `37.2 KB`, `1.71 MB` (decimal units).
    static func bytes(_ value: Int64) -> String {
        switch value {
        case ..<1_000: "\(value) B"
        case ..<1_000_000: String(format: "%.1f KB", Double(value) / 1e3)
        default: String(format: "%.2f MB", Double(value) / 1e6)
        }
    }

    static func percent(_ ratio: Double) -> String {
        guard ratio.isFinite else { return "?" }
        return ratio >= 1 ? "100%" : String(format: "%.3f%%", ratio * 100)
    }

    static func seqs(_ anomaly: Anomaly) -> String {
        switch (anomaly.fromSeq, anomaly.toSeq) {
        case let (from?, to?) where from == to: "\(from)"
        case let (from?, to?): "\(from)–\(to)"
        case let (from?, nil): "\(from)"
        default: ""
        }
    }

    static func fault(_ anomaly: Anomaly) -> String {
        guard let fault = anomaly.fault else { return "none" }
        let occurrence = anomaly.faultOccurrence.map { " #\($0)" } ?? ""
        return (anomaly.faultActive == true ? "during " : "after ") + fault + occurrence
    }

    static func detail(_ detail: [String: String]) -> String {
        detail.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
}
