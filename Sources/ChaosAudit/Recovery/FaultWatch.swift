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
    /// Connections whose path this fault had the kernel drop (a `dead_path` seen in the kernel).
    var diedInKernel: Set<ConnectionID> = []
    /// After a partition or stall ended: until when ``halfOpen`` (then only connections that died in the kernel) waits
    /// for what the pair did during it to reach the proxy, now that the path is back (nil: not waiting).
    var noticeDeadline: Int64?
    /// What the ends' TCPs met on the connections it made dead.
    var deadPath: DeadPathFigures?

    static let disruptiveKinds: Set<String> = ["disconnect", "handoff", "partition", "stall", "refuse", "handshake", "mtu", "restart"]
    static let halfOpenKinds: Set<String> = ["partition", "stall", "handoff"]
    /// The kinds that make a connection's path dead.
    static let deadPathKinds: Set<String> = ["partition", "stall", "handoff", "nat", "link"]

    init(mark: FaultMark, start: Int64) {
        self.mark = mark
        self.start = start
        disruptive = Self.disruptiveKinds.contains(mark.kind)
    }

    /// Whether a close or refusal at `time` can be blamed on this fault: while it lasts, and for a grace after it
    /// (a pair notices late) as long as the pair has not recovered from it or the connection is one it hit (accepted
    /// before it began; `openedAt` nil: unknown, taken as hit). Once every stream it interrupted has resumed, a later
    /// close of a connection made since (a heartbeat that timed out while the machine was stalled) is not its doing.
    func attributes(_ time: Int64, openedAt: Int64? = nil) -> Bool {
        guard disruptive, time >= start else { return false }
        guard let end else { return true }
        guard time <= end + RecoveryTracker.attributionGrace else { return false }
        return time <= end || !recovered || (openedAt ?? start) < start
    }

    /// The pair is back from it: it ended, it hurt, every stream it interrupted has resumed since and no connection
    /// it left half-open is still waited on.
    var recovered: Bool { end != nil && disruption != nil && waitingStreams == 0 && halfOpen.isEmpty }

    /// How long a connection it held half-open had been so at `time`. A partition's or a stall's span stops at its end:
    /// what the pair is seen to notice after it (a close, a stream taken up elsewhere, that a dead path in the kernel
    /// held back), it noticed in it.
    func halfOpenLasted(at time: Int64) -> Int64 {
        let lasted = max(0, time - start)
        guard mark.kind != "handoff", let end else { return lasted }
        return min(lasted, end - start)
    }

    /// Whether anything is still being measured.
    var settled: Bool {
        halfOpen.isEmpty && waitingStreams == 0 && (spreadDone || disruption == nil) && (reconnect != nil || disruption == nil)
            && end != nil
    }

    var impact: FaultImpact {
        var impact = FaultImpact(
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
        impact.deadPath = deadPath
        return impact
    }
}
