package import ChaosCore
import Foundation

/// `repro.yaml`: the shrunk failure as a scenario of its own: the original scenario file with its `faults:` section
/// replaced by the reproducer's faults, each at an explicit `at:` (its original occurrence number in a comment), and
/// its `duration:` set to the reproducer's.
package enum ReproScenario {
    /// One fault of the reproducer as a `faults:` entry: `- partition: {at: 3s, for: 5s, direction: both}  # #9120`.
    package static func faultLine(_ occurrence: FaultOccurrence, original: Int) -> String {
        var fields: [(String, String)] = [("at", "\(occurrence.at)")]
        switch occurrence.kind {
        case .disconnect, .rebind, .protocolFault: break
        case .handoff, .restart: break  // a handoff lasts its blackout, a restart its down time: parameters of their own
        default: fields.append(("for", "\(occurrence.lasts)"))
        }
        fields += occurrence.effect.parameters
        var note = "occurrence #\(original) of the failed run"
        switch occurrence.targets {
        case .all: break
        case .count, .fraction: fields.append(("targets", occurrence.targets.description))
        case .each(let probability): note += "; it reached each connection with probability \(probability), here all"
        }
        if let proxy = occurrence.proxy { fields.append(("proxy", proxy)) }
        let body = fields.map { "\($0.0): \(quoted($0.1))" }.joined(separator: ", ")
        return "  - \(occurrence.kind.rawValue): {\(body)}  # \(note)"
    }

    /// A YAML flow scalar: as it is when plain YAML reads it back the same, double-quoted otherwise.
    static func quoted(_ value: String) -> String {
        let special = CharacterSet(charactersIn: ",{}[]:#&*!|>'\"@`")
        let plain =
            !value.isEmpty && value.rangeOfCharacter(from: special) == nil && value.trimmingCharacters(in: .whitespaces) == value
            && !["true", "false", "null", "yes", "no", "on", "off", "~"].contains(value.lowercased())
        guard !plain else { return value }
        return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// The reproducer's scenario text from the original scenario's `yaml`: `faults:` replaced, `duration:` set.
    package static func text(original yaml: String, timeline: Timeline, originals: [Int], header: [String]) -> String {
        var lines = yaml.components(separatedBy: "\n")
        let faultLines = zip(timeline, originals).map { faultLine($0.0, original: $0.1) }
        let isTopLevel = { (line: String) -> Bool in
            guard let first = line.first else { return false }
            return first != " " && first != "\t" && first != "#" && first != "-"
        }
        if let start = lines.firstIndex(where: { $0.hasPrefix("faults:") }) {
            let end = lines[(start + 1)...].firstIndex(where: isTopLevel) ?? lines.count
            lines.replaceSubrange(start..<end, with: ["faults:"] + faultLines)
        } else {
            lines += ["faults:"] + faultLines
        }
        let duration = "duration: \(timeline.duration)"
        if let at = lines.firstIndex(where: { $0.hasPrefix("duration:") }) { lines[at] = duration } else { lines.insert(duration, at: 0) }
        return (header.map { "# " + $0 } + lines).joined(separator: "\n")
    }
}
