import ChaosAudit
import ChaosCore

/// What a run was meant to judge, beyond its expectations: a verdict over nothing is `inconclusive`, never `pass`.
package struct JudgedScope: Sendable, Equatable {
    /// Whether the run audits messages (a `protocol:` section, or a capture's audit).
    package var auditsMessages: Bool
    /// The proxies the pair was meant to use that carried no connection, as `'name' (listen HOST:PORT)`.
    package var idleProxies: [String]
    /// The fewest audited messages that make a verdict when `expect:` sets no `messages` floor (a pair's default:
    /// one per client process); nil: no default floor.
    package var defaultFloor: Int64?

    /// Creates a scope.
    package init(auditsMessages: Bool, idleProxies: [String] = [], defaultFloor: Int64? = nil) {
        self.auditsMessages = auditsMessages
        self.idleProxies = idleProxies
        self.defaultFloor = defaultFloor
    }
}

extension FaultRecord {
    /// Whether the occurrence touched nothing: no live connection when it began and none opened while it lasted. A
    /// `refuse` or `handshake` fault acts on attempts the proxy never sees as connections, a `restart` on the pair's
    /// server process: never flagged.
    package var touchedNothing: Bool {
        connections == 0 && (openedWhileOn ?? 0) == 0
            && ![FaultKind.refuse, .handshake, .restart].map(\.rawValue).contains(kind)
    }
}

extension RunReport {
    /// The occurrences that touched nothing.
    package var unfiredFaults: [FaultRecord] { faults.filter(\.touchedNothing) }

    /// The share of occurrences that touched something (1 with no fault).
    package var faultsFiredRatio: Double {
        faults.isEmpty ? 1 : Double(faults.count - unfiredFaults.count) / Double(faults.count)
    }

    /// Why the run judged nothing it was meant to judge, each in one sentence (empty: it judged something).
    func vacuousReasons(_ scope: JudgedScope?) -> [String] {
        guard let scope else { return [] }
        var reasons = scope.idleProxies.map { proxy in
            "no connection went through proxy \(proxy): the pair never got through it (is the client pointed at the server itself, "
                + "or were its TLS handshakes refused?)"
        }
        guard scope.auditsMessages, totals.sent == 0 else { return reasons }
        let opened = connections.opened
        if opened == 0 {
            if reasons.isEmpty { reasons.append("no connection went through chaos: nothing was audited") }
            return reasons
        }
        var reason = "\(ReportText.count(opened)) connection\(opened == 1 ? "" : "s") went through chaos but no message was audited"
        if messages.unsequenced > 0 {
            let count = messages.unsequencedRead > 0 ? messages.unsequencedRead : messages.unsequenced
            reason += ": \(ReportText.count(count)) message\(count == 1 ? "" : "s") without a seq"
            if let sample = messages.firstUnsequenced { reason += "; \(sample.sentence)" }
        } else if let errors = anomalyCounts[Anomaly.Class.protocolError.rawValue], errors > 0 {
            reason += ": the bytes are not the declared protocol (\(ReportText.count(errors)) protocol error(s): see the anomalies)"
        } else if messages.framingErrors > 0 {
            reason += ": \(messages.framingErrors) connection direction(s) whose bytes do not fit the framing"
        } else if messages.undecodable > 0 {
            reason += ": \(ReportText.count(messages.undecodable)) frame(s) could not be read in the declared format"
        } else if messages.ignored > 0 {
            reason += ": every message (\(ReportText.count(messages.ignored))) matched an ignore rule"
        } else {
            reason += ": no complete message in the declared framing"
        }
        reasons.append(reason)
        return reasons
    }
}
