import ChaosCore

/// The anomalies found: every one counted by class, the first ``limit`` kept in detail.
struct AnomalyLog {
    let limit: Int
    private(set) var kept: [Anomaly] = []
    private(set) var counts: [Anomaly.Class: Int64] = [:]

    init(limit: Int) { self.limit = limit }

    mutating func add(_ anomaly: @autoclosure () -> Anomaly, kind: Anomaly.Class) {
        counts[kind, default: 0] += 1
        if kept.count < limit { kept.append(anomaly()) }
    }

    /// One anomaly of `kind` counted earlier is withdrawn: the count drops, and the last kept one `matches` picks goes.
    mutating func withdraw(_ kind: Anomaly.Class, matching matches: (Anomaly) -> Bool) {
        guard let count = counts[kind], count > 0 else { return }
        counts[kind] = count == 1 ? nil : count - 1
        if let index = kept.lastIndex(where: { $0.kind == kind && matches($0) }) { kept.remove(at: index) }
    }

    var countsByName: [String: Int64] {
        Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) })
    }
}

/// Which fault was active at a moment, for labelling anomalies.
struct FaultContext {
    private(set) var active: [FaultMark] = []
    private(set) var last: FaultMark?

    mutating func started(_ mark: FaultMark) {
        active.append(mark)
        last = mark
    }

    mutating func ended(_ mark: FaultMark) {
        active.removeAll { $0.occurrence == mark.occurrence && $0.kind == mark.kind }
    }

    /// The most recent active fault, else the last one that started (not active).
    var label: (kind: String, occurrence: Int, active: Bool)? {
        if let mark = active.last { return (mark.kind, mark.occurrence, true) }
        if let last { return (last.kind, last.occurrence, false) }
        return nil
    }
}
