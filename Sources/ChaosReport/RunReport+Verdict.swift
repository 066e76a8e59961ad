import ChaosAudit
package import ChaosCore
import Foundation

extension RunReport {
    /// The measured value of the figure an `expect:` line names, in its unit; nil for an unknown name.
    package func measured(_ name: String) -> Double? {
        if let count = totals.count(named: name) { return Double(count) }
        switch name {
        case "delivery": return totals.deliveryRatio
        case "faults": return Double(faults.count)
        case "pair_exits": return Double(pairExits?.values.filter { $0 != 0 }.count ?? 0)
        case "transit_p99": return recovery.transitS.p99
        default: break
        }
        let parts = name.split(separator: "_", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        switch parts[0] {
        case "recovery": return recovery.resumeS.value(named: parts[1])
        case "reconnect": return recovery.reconnectS.value(named: parts[1])
        default: return nil
        }
    }

    /// Formats a value in the unit of figure `name`: `3`, `99.95%`, `2.310s`.
    package static func format(_ value: Double, for name: String) -> String {
        let unit = Expectation.known.first { $0.name == name }?.unit ?? .count
        switch unit {
        case .count: return String(Int64(value))
        case .ratio: return String(format: "%.3f%%", value * 100)
        case .seconds: return String(format: "%.3fs", value)
        }
    }

    /// Judges every expectation and sets ``verdict``: `error` when `errorReason` is set or a figure is unknown,
    /// `fail` when one does not hold, `pass` otherwise.
    package mutating func judge(_ expectations: [Expectation], errorReason: String? = nil) {
        var unknown: [String] = []
        self.expectations = expectations.map { expectation in
            let written = expectation.written
            let hasOperator = Expectation.Comparison.allCases.contains { written.hasPrefix($0.rawValue) }
            let expected = hasOperator ? written : "\(expectation.comparison.rawValue) \(written)"
            guard let value = measured(expectation.name) else {
                unknown.append(expectation.name)
                return ExpectationResult(
                    name: expectation.name,
                    expected: expected,
                    actual: "unknown figure",
                    ok: false,
                    value: nil
                )
            }
            var ok = expectation.comparison.holds(value, expectation.bound)
            var actual = Self.format(value, for: expectation.name)
            let isRecovery = expectation.name.hasPrefix("recovery_")
            if isRecovery, complete, recovery.neverResumed > 0 {
                ok = false
                actual += " (\(recovery.neverResumed) stream\(recovery.neverResumed == 1 ? "" : "s") never resumed)"
            } else if isRecovery || expectation.name.hasPrefix("reconnect_"),
                (isRecovery ? recovery.resumeS.count : recovery.reconnectS.count) == 0
            {
                actual += " (no samples)"
            }
            return ExpectationResult(name: expectation.name, expected: expected, actual: actual, ok: ok, value: value)
        }
        if let errorReason {
            verdict = .error
            verdictReason = errorReason
        } else if !unknown.isEmpty {
            verdict = .error
            verdictReason = "unknown expectation figure(s): \(unknown.joined(separator: ", "))"
        } else if let failed = self.expectations.first(where: { !$0.ok }) {
            verdict = .fail
            let count = self.expectations.filter { !$0.ok }.count
            verdictReason =
                "\(failed.name) is \(failed.actual), expected \(failed.expected)"
                + (count > 1 ? " (and \(count - 1) more)" : "")
        } else {
            verdict = .pass
            verdictReason = nil
        }
    }
}
