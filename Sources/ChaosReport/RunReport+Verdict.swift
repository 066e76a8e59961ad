import ChaosAudit
package import ChaosCore
import Foundation

extension RunReport {
    /// The measured value of the figure an `expect:` line names, in its unit; nil for an unknown name.
    package func measured(_ name: String) -> Double? {
        // A stream whose messages may be lost by contract (QoS 0) is judged apart: `lost` counts the others.
        if name == "lost" { return Double(totals.lost - lostAtMostOnce) }
        if name == "lost_qos0" { return Double(lostAtMostOnce) }
        if let count = totals.count(named: name) { return Double(count) }
        switch name {
        case "delivery": return totals.deliveryRatio
        case "faults": return Double(faults.count)
        case "messages": return Double(totals.sent)
        case "faults_fired": return faultsFiredRatio
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

    /// The seqs lost from streams whose contract lets them be lost (``DeliveryContract/atMostOnce``: QoS 0).
    package var lostAtMostOnce: Int64 {
        streams.filter { $0.contract == .atMostOnce }.reduce(0) { $0 + $1.counts.lost }
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
    /// `fail` when one does not hold, `inconclusive` when the run judged too little (``JudgedScope``, an unmet
    /// `messages` floor), `pass` otherwise. A checkpoint is never inconclusive: the run goes on.
    package mutating func judge(
        _ expectations: [Expectation],
        errorReason: String? = nil,
        scope: JudgedScope? = nil,
        pairExitedEarly: String? = nil
    ) {
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
            } else if expectation.name == "faults_fired", !ok {
                actual +=
                    " (\(unfiredFaults.count) touched nothing: \(unfiredFaults.prefix(3).map { "\($0.kind) #\($0.occurrence)" }.joined(separator: ", ")))"
            }
            return ExpectationResult(name: expectation.name, expected: expected, actual: actual, ok: ok, value: value)
        }
        var tooLittle = complete ? vacuousReasons(scope) : []
        let floor = self.expectations.first { Expectation.judgedTooLittle.contains($0.name) }
        if let floor, !floor.ok, complete {
            tooLittle.append("fewer messages than the floor: \(floor.actual) audited, expected \(floor.expected)")
        } else if floor == nil, complete, let minimum = scope?.defaultFloor, totals.sent < minimum, totals.sent > 0 {
            tooLittle.append(
                "fewer messages than the default floor of a run with a pair (one per client: \(minimum)): \(totals.sent) audited "
                    + "(expect: {messages: N} sets your own)"
            )
        }
        inconclusive = tooLittle.isEmpty ? nil : tooLittle
        let failed = self.expectations.filter { !$0.ok && !Expectation.judgedTooLittle.contains($0.name) }
        if let errorReason {
            verdict = .error
            verdictReason = errorReason
        } else if !unknown.isEmpty {
            verdict = .error
            verdictReason = "unknown expectation figure(s): \(unknown.joined(separator: ", "))"
        } else if !failed.isEmpty || (pairExitedEarly != nil && complete && recovery.neverResumed > 0) {
            // The finding first: a stream that never resumed after a fault, then the expectations it broke; a pair
            // process that exited is context for it.
            verdict = .fail
            var reasons: [String] = []
            if complete, recovery.neverResumed > 0 {
                reasons.append("\(recovery.neverResumed) stream\(recovery.neverResumed == 1 ? "" : "s") never resumed after a fault")
            }
            if let first = failed.first {
                reasons.append(
                    "\(first.name) is \(first.actual), expected \(first.expected)" + (failed.count > 1 ? " (and \(failed.count - 1) more)" : "")
                )
            }
            if let pairExitedEarly { reasons.append("pair process(es) exited during the run: \(pairExitedEarly)") }
            verdictReason = reasons.joined(separator: "; ")
        } else if let pairExitedEarly {
            verdict = .error
            verdictReason = "pair process(es) exited during the run: \(pairExitedEarly)"
        } else if let first = tooLittle.first {
            verdict = .inconclusive
            verdictReason = first + (tooLittle.count > 1 ? " (and \(tooLittle.count - 1) more)" : "")
        } else {
            verdict = .pass
            verdictReason = nil
        }
    }
}
