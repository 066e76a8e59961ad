/// When a run's fault schedule was paused (the live page's pause and resume, `POST /schedule/pause|resume`), on the
/// timeline's own clock (zero at the timeline's origin): every occurrence planned at or after a pause's start begins
/// that much later, with its whole length after it (a fault already on when the pause began ends when it was planned
/// to). Saved in timeline.json (`pauses`), so that `chaos replay` pauses at the same moments and draws the same
/// timeline.
package struct SchedulePauses: Sendable, Equatable, Codable {
    /// One pause: from `at`, for `lasts` (the schedule's clock stands still meanwhile).
    package struct Span: Sendable, Equatable, Codable {
        /// When it began, on the timeline's clock (real time since the origin, pauses before it included).
        package var at: ChaosDuration
        /// How long it lasted.
        package var lasts: ChaosDuration

        /// A pause from `at` for `lasts`.
        package init(at: ChaosDuration, lasts: ChaosDuration) {
            self.at = at
            self.lasts = lasts
        }

        /// When it ended.
        package var end: ChaosDuration { at + lasts }

        private enum CodingKeys: String, CodingKey {
            case at
            case lasts = "for"
        }
    }

    /// The pauses, in time order, none overlapping.
    package private(set) var spans: [Span]

    /// No pause.
    package static let none = SchedulePauses(spans: [])

    /// Pauses as saved; they are put in time order, and one that begins before the last ended is refused.
    package init(spans: [Span]) {
        self.spans = spans.sorted { $0.at < $1.at }
    }

    package init(from decoder: any Decoder) throws {
        let spans = try decoder.singleValueContainer().decode([Span].self)
        for (earlier, later) in zip(spans, spans.dropFirst()) where later.at < earlier.end {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "pauses overlap: one at \(later.at) begins before the one at \(earlier.at) ends"
                )
            )
        }
        for span in spans where span.at < .zero || span.lasts < .zero {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a pause at \(span.at) for \(span.lasts) is negative")
            )
        }
        self.init(spans: spans)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(spans)
    }

    /// Whether there is none.
    package var isEmpty: Bool { spans.isEmpty }

    /// Adds a pause that began at or after the last one ended.
    package mutating func append(_ span: Span) {
        precondition(spans.last.map { $0.end <= span.at } ?? true, "pauses are added in time order")
        spans.append(span)
    }

    /// When an occurrence planned at `at` (on an unpaused schedule) begins: each pause that began by then (at the
    /// same instant too: a pause comes first) pushes it, and what it pushed, later by its length.
    package func begin(ofPlanned at: ChaosDuration) -> ChaosDuration {
        var time = at
        for span in spans where span.at <= time { time = time + span.lasts }
        return time
    }

    /// All the time paused.
    package var total: ChaosDuration { spans.reduce(.zero) { $0 + $1.lasts } }
}
