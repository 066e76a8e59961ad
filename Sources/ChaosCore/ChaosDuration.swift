/// A span of time as scenarios write it: `250ms`, `5s`, `2m`, `72h`, `1.5s`, `100us`.
///
/// Stored as whole nanoseconds so that timelines are exact and identical on every machine.
package struct ChaosDuration: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The length in nanoseconds.
    package var nanoseconds: Int64

    /// A duration of `nanoseconds`.
    package init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// Zero length.
    package static let zero = ChaosDuration(nanoseconds: 0)

    package static func nanoseconds(_ n: Int64) -> ChaosDuration { ChaosDuration(nanoseconds: n) }
    package static func microseconds(_ n: Int64) -> ChaosDuration { ChaosDuration(nanoseconds: n * 1_000) }
    package static func milliseconds(_ n: Int64) -> ChaosDuration { ChaosDuration(nanoseconds: n * 1_000_000) }
    package static func seconds(_ n: Int64) -> ChaosDuration { ChaosDuration(nanoseconds: n * 1_000_000_000) }
    package static func seconds(_ s: Double) -> ChaosDuration { ChaosDuration(nanoseconds: Int64((s * 1e9).rounded())) }

    /// The length in seconds.
    package var seconds: Double { Double(nanoseconds) / 1e9 }

    package static func < (lhs: ChaosDuration, rhs: ChaosDuration) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
    package static func + (lhs: ChaosDuration, rhs: ChaosDuration) -> ChaosDuration {
        ChaosDuration(nanoseconds: lhs.nanoseconds &+ rhs.nanoseconds)
    }
    package static func - (lhs: ChaosDuration, rhs: ChaosDuration) -> ChaosDuration {
        ChaosDuration(nanoseconds: lhs.nanoseconds &- rhs.nanoseconds)
    }

    private static let units: [(suffix: String, nanos: Int64)] = [
        ("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000),
        ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000), ("d", 86_400_000_000_000),
    ]

    /// Parses `250ms`, `5s`, `1.5s`, `2m`, `72h`, `0`. Returns nil for anything else.
    package init?(parsing text: String) {
        let trimmed = text.trimmingWhitespace
        if trimmed == "0" {
            self = .zero
            return
        }
        // Longest suffix first so that "ms" wins over "s".
        for unit in Self.units.sorted(by: { $0.suffix.count > $1.suffix.count }) where trimmed.hasSuffix(unit.suffix) {
            let number = trimmed.dropLast(unit.suffix.count)
            guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
                number.filter({ $0 == "." }).count <= 1, let value = Double(number), value.isFinite
            else { return nil }
            let nanos = value * Double(unit.nanos)
            guard nanos < 9e18 else { return nil }
            self.nanoseconds = Int64(nanos.rounded())
            return
        }
        return nil
    }

    /// Shortest exact form: `1.5s`, `250ms`, `2m`, `72h`.
    package var description: String {
        let n = nanoseconds
        if n == 0 { return "0s" }
        let sign = n < 0 ? "-" : ""
        let a = n.magnitude
        for (suffix, unit) in [("h", UInt64(3_600_000_000_000)), ("m", 60_000_000_000)] where a % unit == 0 {
            return "\(sign)\(a / unit)\(suffix)"
        }
        if a >= 1_000_000_000 { return sign + Self.decimal(a, unit: 1_000_000_000) + "s" }
        if a >= 1_000_000 { return sign + Self.decimal(a, unit: 1_000_000) + "ms" }
        if a >= 1_000 { return sign + Self.decimal(a, unit: 1_000) + "us" }
        return "\(sign)\(a)ns"
    }

    private static func decimal(_ value: UInt64, unit: UInt64) -> String {
        let whole = value / unit
        var fraction = value % unit
        if fraction == 0 { return "\(whole)" }
        // three decimals are plenty for humans; the stored value stays exact.
        fraction = (fraction * 1000 + unit / 2) / unit
        if fraction >= 1000 { return "\(whole + 1)" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }

    package init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = ChaosDuration(parsing: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad duration \(text)"))
        }
        self = value
    }

    /// Encodes the short form when it is exact, else whole nanoseconds (`1641341627ns`), so that a
    /// timeline written to disk and read back (for `chaos replay`) is the same to the nanosecond.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        let text = description
        try container.encode(ChaosDuration(parsing: text) == self ? text : "\(nanoseconds)ns")
    }
}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
