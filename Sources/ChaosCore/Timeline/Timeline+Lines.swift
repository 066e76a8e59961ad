/// How a timeline reads: one line per occurrence, and how many there are.
extension Timeline {
    /// One line per occurrence for the first `limit` occurrences: time, kind, how long, parameters, targets, proxy.
    package func lines(first limit: Int) -> [String] {
        prefix(limit).map(Self.line)
    }

    /// `00:01:02.345  disconnect      mode=reset targets=all`.
    package static func line(_ occurrence: FaultOccurrence) -> String {
        var line = clock(occurrence.at) + "  " + pad(occurrence.kind.rawValue, 10)
        line += occurrence.lasts == .zero ? "  " + pad("", 14) : "  for " + pad("\(occurrence.lasts)", 10)
        var parameters = occurrence.effect.summary
        if occurrence.kind != .refuse, occurrence.kind != .link {
            parameters += (parameters.isEmpty ? "" : " ") + "targets=\(occurrence.targets)"
        }
        if let proxy = occurrence.proxy { parameters += " proxy=\(proxy)" }
        return (line + "  " + parameters).trimmingWhitespace
    }

    /// `00:01:02.345`: hours, minutes, seconds and milliseconds since the start.
    package static func clock(_ duration: ChaosDuration) -> String {
        let millis = duration.nanoseconds / 1_000_000
        let seconds = millis / 1000
        let fraction = millis % 1000
        let h = seconds / 3600
        let m = (seconds / 60) % 60
        let s = seconds % 60
        let two = { (n: Int64) in n < 10 ? "0\(n)" : "\(n)" }
        let three = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(two(h)):\(two(m)):\(two(s)).\(three)"
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

/// How many occurrences a timeline has: counted when that is quick, else a formula per rule.
package struct TimelineCount: Sendable, Equatable, CustomStringConvertible {
    /// The exact count, when it was counted.
    package var exact: Int?
    /// Bounds and the expected count when it was not: per repeating rule, the window over the longest and the
    /// shortest gap, and the window over the mean gap times the probability.
    package var fewest: Double
    package var most: Double
    package var expected: Double
    /// Per rule, how its count follows from its schedule (`(until − after) / every × probability`).
    package var formulas: [String]

    /// `42 fault occurrences`, or `about 7.2e+09 fault occurrences (between … and …)`.
    package var description: String {
        if let exact { return "\(exact) fault occurrence\(exact == 1 ? "" : "s")" }
        if fewest == most { return "\(Self.figure(most)) fault occurrences (by the formula)" }
        return "about \(Self.figure(expected)) fault occurrences (between \(Self.figure(fewest)) and \(Self.figure(most)))"
    }

    static func figure(_ value: Double) -> String {
        value < 1e15 ? "\(Int64(value.rounded()))" : "\(value)"
    }
}

extension Timeline {
    /// Counts the occurrences by drawing them when there are at most `countUpTo`; otherwise estimates.
    /// Either way memory stays constant.
    package func count(upTo countUpTo: Int = 200_000) -> TimelineCount {
        var formulas: [String] = []
        var fewest = 0.0
        var most = 0.0
        var expected = 0.0
        if case .drawn(let rules) = source {
            for (index, rule) in rules.enumerated() {
                let estimate = rule.countEstimate(in: duration)
                fewest += estimate.fewest
                most += estimate.most
                expected += estimate.expected
                formulas.append("rule \(index) (\(rule.kind.rawValue)): \(estimate.formula)")
            }
        }
        var counted = 0
        var iterator = makeIterator()
        while counted <= countUpTo, iterator.next() != nil { counted += 1 }
        guard counted > countUpTo else {
            return TimelineCount(
                exact: counted,
                fewest: Double(counted),
                most: Double(counted),
                expected: Double(counted),
                formulas: formulas
            )
        }
        return TimelineCount(exact: nil, fewest: fewest, most: most, expected: expected, formulas: formulas)
    }
}

extension FaultRule {
    /// Bounds on this rule's occurrence count in a run of `duration`, and the formula behind them.
    func countEstimate(in duration: ChaosDuration) -> (fewest: Double, most: Double, expected: Double, formula: String) {
        let probability = schedule.probability
        guard let every = schedule.every else {
            let text = schedule.at.map { "once at \($0)" } ?? "once at \(schedule.after)"
            return (0, 1, probability, text + (probability < 1 ? " with probability \(probability)" : ""))
        }
        let end = min(schedule.until ?? duration, duration)
        let window = max(0, Double(end.nanoseconds) - Double(schedule.after.nanoseconds))
        let shortest = Double(max(every.lower.nanoseconds, 1))
        let longest = Double(max(every.upper.nanoseconds, 1))
        let mean = (shortest + longest) / 2
        let most = (window / shortest).rounded(.down)
        let fewest = probability >= 1 ? (window / longest).rounded(.down) : 0
        let text = "(\(end) − \(schedule.after)) / every \(every)" + (probability < 1 ? " × probability \(probability)" : "")
        return (fewest, most, window / mean * probability, text)
    }
}
