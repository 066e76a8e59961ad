import ChaosCore

/// What the recovery analysis tracks for one run-wide fault occurrence.
final class FaultWatch {
    let mark: FaultMark
    let start: Int64
    var end: Int64?
    let disruptive: Bool
    /// When it first hurt: the first connection closed (or attempt refused) attributed to it.
    var disruption: Int64?
    var connectionsClosed = 0
    /// Time from disruption to the next accepted connection.
    var reconnect: Int64?
    var streamsAffected = 0
    var slowestResume: Int64?
    var waitingStreams = 0
    var neverResumed = 0
    /// Reconnect attempt times in the window after the disruption (capped).
    var attempts: [Int64] = []
    var spreadDone = false
    /// Connections alive when a partition / stall / handoff began that the pair has not closed yet.
    var halfOpen: Set<ConnectionID> = []
    var halfOpenTotal = 0
    var halfOpenNoticed = 0
    var halfOpenUnnoticed = 0
    var halfOpenLongest: Int64 = 0

    static let disruptiveKinds: Set<String> = ["disconnect", "handoff", "partition", "stall", "refuse", "handshake", "mtu", "restart"]
    static let halfOpenKinds: Set<String> = ["partition", "stall", "handoff"]

    init(mark: FaultMark, start: Int64) {
        self.mark = mark
        self.start = start
        disruptive = Self.disruptiveKinds.contains(mark.kind)
    }

    /// Whether a close or refusal at `time` can be blamed on this fault.
    func attributes(_ time: Int64) -> Bool {
        guard disruptive, time >= start else { return false }
        guard let end else { return true }
        return time <= end + RecoveryTracker.attributionGrace
    }

    /// Whether anything is still being measured.
    var settled: Bool {
        halfOpen.isEmpty && waitingStreams == 0 && (spreadDone || disruption == nil) && (reconnect != nil || disruption == nil)
            && end != nil
    }

    var impact: FaultImpact {
        FaultImpact(
            occurrence: mark.occurrence,
            kind: mark.kind,
            atS: Double(start) / 1e9,
            forS: end.map { Double($0 - start) / 1e9 } ?? 0,
            connectionsClosed: connectionsClosed,
            reconnectS: reconnect.map { Double($0) / 1e9 },
            resumeS: slowestResume.map { Double($0) / 1e9 },
            streamsAffected: streamsAffected,
            neverResumed: neverResumed + waitingStreams,
            detail: mark.addedThroughAPI ? mark.detail : nil
        )
    }
}
