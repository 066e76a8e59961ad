internal import Yams

/// A YAML node together with the file it came from, with typed readers that fail with
/// `file:line:column` and what was expected. Used only while parsing scenarios.
struct YAMLValue {
    let node: Node
    let file: String

    var location: ChaosError.Location {
        ChaosError.Location(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
    }

    func error(_ message: String) -> ChaosError { .badInput(message, at: location) }

    /// Describes what the node is, for messages: "a mapping", "the text 'abc'".
    var shape: String {
        switch node {
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .scalar(let scalar): scalar.string.isEmpty ? "nothing" : "'\(scalar.string)'"
        case .alias: "an alias"
        }
    }

    var isMapping: Bool { if case .mapping = node { true } else { false } }
    var isSequence: Bool { if case .sequence = node { true } else { false } }
    var isScalar: Bool { if case .scalar = node { true } else { false } }

    var isNull: Bool {
        if case .scalar(let scalar) = node { return scalar.string.isEmpty || scalar.string == "~" || scalar.string == "null" }
        return false
    }

    /// The node as a mapping whose keys are all in `allowed` (any key when nil).
    func mapping(_ what: String, allowed: [String]?) throws -> YAMLMapping {
        guard case .mapping(let mapping) = node else { throw error("\(what) must be a mapping, found \(shape)") }
        var entries: [(key: String, keyValue: YAMLValue, value: YAMLValue)] = []
        for (keyNode, valueNode) in mapping {
            let keyValue = YAMLValue(node: keyNode, file: file)
            guard case .scalar(let scalar) = keyNode else { throw keyValue.error("keys in \(what) must be plain words") }
            let key = scalar.string
            if entries.contains(where: { $0.key == key }) { throw keyValue.error("duplicate key '\(key)' in \(what)") }
            if let allowed, !allowed.contains(key) {
                var message = "unknown key '\(key)' in \(what); expected one of: \(allowed.joined(separator: ", "))"
                if let near = YAMLValue.nearest(to: key, in: allowed) { message += " (did you mean '\(near)'?)" }
                throw keyValue.error(message)
            }
            entries.append((key, keyValue, YAMLValue(node: valueNode, file: file)))
        }
        return YAMLMapping(owner: self, what: what, entries: entries)
    }

    func sequence(_ what: String) throws -> [YAMLValue] {
        guard case .sequence(let sequence) = node else { throw error("\(what) must be a list, found \(shape)") }
        return sequence.map { YAMLValue(node: $0, file: file) }
    }

    func string(_ what: String) throws -> String {
        guard case .scalar(let scalar) = node, !isNull else { throw error("\(what) must be text, found \(shape)") }
        return scalar.string
    }

    func int(_ what: String, in range: ClosedRange<Int64>) throws -> Int64 {
        let text = try string(what)
        guard let value = Int64(text.replacingUnderscores) else { throw error("\(what) must be a whole number, found '\(text)'") }
        guard range.contains(value) else {
            throw error("\(what) must be between \(range.lowerBound) and \(range.upperBound), found \(value)")
        }
        return value
    }

    func unsigned(_ what: String) throws -> UInt64 {
        let text = try string(what)
        guard let value = UInt64(text.replacingUnderscores) else {
            throw error("\(what) must be a whole number from 0 to \(UInt64.max), found '\(text)'")
        }
        return value
    }

    func double(_ what: String, in range: ClosedRange<Double>) throws -> Double {
        let text = try string(what)
        let value: Double?
        if text.hasSuffix("%") { value = Double(text.dropLast()).map { $0 / 100 } } else { value = Double(text) }
        guard let value, value.isFinite else { throw error("\(what) must be a number, found '\(text)'") }
        guard range.contains(value) else {
            throw error("\(what) must be between \(range.lowerBound) and \(range.upperBound), found \(text)")
        }
        return value
    }

    func bool(_ what: String) throws -> Bool {
        switch try string(what).lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        case let other: throw error("\(what) must be true or false, found '\(other)'")
        }
    }

    func duration(_ what: String) throws -> ChaosDuration {
        let text = try string(what)
        guard let value = ChaosDuration(parsing: text) else {
            throw error("\(what) must be a duration like 250ms, 5s, 2m or 72h, found '\(text)'")
        }
        guard value.nanoseconds >= 0 else { throw error("\(what) must not be negative") }
        guard value <= Scenario.longestDuration else { throw error("\(what) must be at most 10 years, found \(text)") }
        return value
    }

    func durationRange(_ what: String) throws -> DurationRange {
        let text = try string(what)
        switch DurationRange.parse(text) {
        case .success(let range):
            guard range.upper <= Scenario.longestDuration else { throw error("\(what) must be at most 10 years, found \(text)") }
            return range
        case .failure(.inverted):
            throw error("\(what) is an empty range '\(text)': the first bound must not be above the second")
        case .failure(.badDuration(let part)):
            throw error("\(what) must be a duration or a range like 5s..30s; '\(part)' is not a duration (250ms, 5s, 2m, 72h)")
        }
    }

    func choice<T: RawRepresentable & CaseIterable>(_ what: String, of: T.Type) throws -> T where T.RawValue == String {
        let text = try string(what)
        guard let value = T(rawValue: text) else {
            var message = "\(what) must be one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), found '\(text)'"
            if let near = YAMLValue.nearest(to: text, in: T.allCases.map(\.rawValue)) { message += " (did you mean '\(near)'?)" }
            throw error(message)
        }
        return value
    }

    /// The closest candidate by edit distance, when it is close enough to be a typo.
    static func nearest(to word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, editDistance(word, $0)) }.min { $0.1 < $1.1 }
        guard let (best, distance) = scored, distance <= max(1, word.count / 3) else { return nil }
        return best
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where j <= b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// The entries of a YAML mapping whose keys were checked against the allowed ones.
struct YAMLMapping {
    let owner: YAMLValue
    let what: String
    let entries: [(key: String, keyValue: YAMLValue, value: YAMLValue)]

    subscript(key: String) -> YAMLValue? {
        entries.first { $0.key == key }.flatMap { $0.value.isNull ? nil : $0.value }
    }

    func required(_ key: String) throws -> YAMLValue {
        guard let value = self[key] else { throw owner.error("\(what) needs '\(key)'") }
        return value
    }

    var keys: [String] { entries.map(\.key) }
}

extension String {
    var replacingUnderscores: String { filter { $0 != "_" } }
}
