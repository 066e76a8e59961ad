/// An MQTT topic filter (MQTT 3.1.1 section 4.7): levels split by `/`, `+` one whole level, `#` every level from there
/// on (the last level only). As brokers do, a filter that starts with a wildcard does not match a topic that starts
/// with `$` (`$SYS/…`).
struct MQTTTopicFilter: Sendable, Equatable {
    private let levels: [Substring]

    /// The filter, or nil when it is not one (``problem(_:)`` says why).
    init?(_ text: String) {
        guard Self.problem(text) == nil else { return nil }
        levels = text.split(separator: "/", omittingEmptySubsequences: false)
    }

    /// What makes `text` no topic filter (nil: it is one).
    static func problem(_ text: String) -> String? {
        if text.isEmpty { return "is empty: a topic filter names at least one level" }
        if text.utf8.count > 65_535 { return "is longer than MQTT's 65,535 bytes" }
        if text.contains("\u{0}") { return "contains a NUL character" }
        let levels = text.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level.contains("#"), level != "#" || index != levels.count - 1 {
                return "has '#' other than as its whole last level (fleet/#)"
            }
            if level.contains("+"), level != "+" { return "has '+' other than as a whole level (fleet/+/position)" }
        }
        return nil
    }

    /// Whether a PUBLISH to `topic` matches.
    func matches(_ topic: String) -> Bool {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        if topic.hasPrefix("$"), let first = levels.first, first == "+" || first == "#" { return false }
        for (index, level) in levels.enumerated() {
            if level == "#" { return true }
            guard index < parts.count else { return false }
            if level != "+", level != parts[index] { return false }
        }
        return parts.count == levels.count
    }
}
