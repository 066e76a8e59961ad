/// A closed range of durations as scenarios write it, `5s..30s`, or a single value `5s`.
/// Drawn uniformly from a ``SeededGenerator``.
package struct DurationRange: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The smallest value.
    package var lower: ChaosDuration
    /// The largest value (inclusive).
    package var upper: ChaosDuration

    /// A range from `lower` to `upper`; callers check `lower <= upper`.
    package init(_ lower: ChaosDuration, _ upper: ChaosDuration) {
        self.lower = lower
        self.upper = upper
    }

    /// A range that always gives `value`.
    package init(exactly value: ChaosDuration) { self.init(value, value) }

    /// The midpoint, the mean of a uniform draw.
    package var mean: ChaosDuration { ChaosDuration(nanoseconds: lower.nanoseconds / 2 + upper.nanoseconds / 2) }

    package var description: String { lower == upper ? lower.description : "\(lower)..\(upper)" }

    package init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard case .success(let range) = DurationRange.parse(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad range \(text)"))
        }
        self = range
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Why a range text is unusable.
    package enum ParseProblem: Error, Sendable, Equatable {
        case badDuration(String)
        case inverted
    }

    /// Parses `5s`, `5s..30s`. An inverted range (`30s..5s`) is an error.
    package static func parse(_ text: String) -> Result<DurationRange, ParseProblem> {
        let parts = text.split(separator: "..", omittingEmptySubsequences: false).map(String.init)
        guard parts.count <= 2 else { return .failure(.badDuration(text)) }
        guard let lower = ChaosDuration(parsing: parts[0]) else { return .failure(.badDuration(parts[0].trimmingWhitespace)) }
        guard parts.count == 2 else { return .success(DurationRange(exactly: lower)) }
        guard let upper = ChaosDuration(parsing: parts[1]) else { return .failure(.badDuration(parts[1].trimmingWhitespace)) }
        guard lower <= upper else { return .failure(.inverted) }
        return .success(DurationRange(lower, upper))
    }
}
