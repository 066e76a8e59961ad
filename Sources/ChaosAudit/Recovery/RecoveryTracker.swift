import ChaosCore

/// Measures recovery from run-wide faults: time to the next accepted connection and to the first new message
/// on each interrupted stream, how long half-open partitions lasted before the pair noticed, and how reconnect
/// attempts spread out after a mass disconnect.
struct RecoveryTracker {
    /// A close or refusal up to this long after a fault ended is still blamed on it (a pair notices late).
    static let attributionGrace: Int64 = 30_000_000_000
    /// Reconnect attempts are collected this long after a disruption.
    static let spreadWindow: Int64 = 30_000_000_000
    /// The short window of a thundering herd.
    static let herdWindow: Int64 = 50_000_000
    /// Watches kept open at most (the oldest is closed beyond this).
    static let openLimit = 64
    static let attemptLimit = 4096

    private(set) var reconnect = LatencyRecorder()
    private(set) var resume = LatencyRecorder()
    private(set) var halfOpenDurations = LatencyRecorder()
    /// The fastest the pair noticed a half-open connection (nanoseconds).
    private var fastestNotice: Int64?
    /// Watches still measuring something, oldest first.
    private var open: [FaultWatch] = []
    /// Impacts of settled watches.
    private var settled: [FaultImpact] = []
    /// The last settled watches of the kinds that kill paths, with their index in ``settled``: a connection whose path
    /// such a fault killed may come back to life, or end, long after the fault did (a NAT's mapping stays dead), and what
    /// its ends met still counts for it.
    private var settledDeadPathWatches: [(watch: FaultWatch, index: Int)] = []
    private var halfOpenRecords: [HalfOpenRecord] = []
    private var spreads: [ReconnectSpread] = []
    private var neverResumed = 0
    /// Streams a NAT's silent death caught, each waiting for a message past what it had delivered (see
    /// ``natExpired(at:streams:)``).
    private var silentWaits: [SilentWait] = []
    /// Set once the run began stopping the pair: nothing after that is blamed on a fault.
    private var stoppedAt: Int64?

    /// The run is stopping the pair: closes from now on are not a fault's, and streams still
    /// waiting for a fault's recovery are settled as never resumed only if the fault left them so.
    mutating func stopping(at time: Int64) {
        advance(to: time)
        stoppedAt = time
    }

    mutating func faultStarted(_ mark: FaultMark, at time: Int64, live: some Sequence<ConnectionID>) {
        advance(to: time)
        let watch = FaultWatch(mark: mark, start: time)
        if FaultWatch.halfOpenKinds.contains(mark.kind) {
            watch.halfOpen = Set(live)
            watch.halfOpenTotal = watch.halfOpen.count
        }
        open.append(watch)
        if open.count > Self.openLimit { close(open.removeFirst(), at: time, final: true) }
    }

    mutating func faultEnded(_ mark: FaultMark, at time: Int64) {
        advance(to: time)
        for watch in open.reversed() where watch.mark.occurrence == mark.occurrence && watch.end == nil {
            watch.end = time
            // A partition or stall that ends before the pair noticed it was ridden out: those
            // connections were half-open for exactly as long as it lasted, and are settled now. But on a dead path in
            // the kernel what an end did in it reaches the proxy only now: its FIN waited behind its own
            // unacknowledged bytes, its new connection's first messages in the fault's hold. Those connections wait
            // for that, for as long again as the fault lasted (a retransmission's backoff), at least a second.
            if mark.kind == "partition" || mark.kind == "stall", !watch.halfOpen.isEmpty {
                let waiting = watch.halfOpen.intersection(watch.diedInKernel)
                let riddenOut = watch.halfOpen.count - waiting.count
                watch.halfOpen = waiting
                if riddenOut > 0 { settleUnnoticed(watch, count: riddenOut, at: time) }
                if !waiting.isEmpty { watch.noticeDeadline = time + min(max(time - watch.start, Self.noticeWaitFloor), Self.attributionGrace) }
            }
            break
        }
    }

    /// The latest disruptive fault a close or refusal at `time` is blamed on; `openedAt` is when the closing
    /// connection was accepted (nil for a refusal, or when unknown).
    private func blamed(at time: Int64, openedAt: Int64? = nil) -> FaultWatch? {
        if let stoppedAt, time >= stoppedAt { return nil }
        return open.last { $0.attributes(time, openedAt: openedAt) }
    }

    mutating func opened(at time: Int64) {
        advance(to: time)
        for watch in open where watch.reconnect == nil {
            guard let disruption = watch.disruption, time >= disruption else { continue }
            watch.reconnect = time - disruption
            reconnect.record(nanoseconds: time - disruption)
        }
        attempt(at: time)
    }

    mutating func refused(at time: Int64) {
        advance(to: time)
        if let watch = blamed(at: time), watch.disruption == nil { watch.disruption = time }
        attempt(at: time)
    }

    private func attempt(at time: Int64) {
        let watch = open.last { watch in
            guard let disruption = watch.disruption, !watch.spreadDone else { return false }
            return time >= disruption && time - disruption <= Self.spreadWindow
        }
        if let watch, watch.attempts.count < Self.attemptLimit { watch.attempts.append(time) }
    }

    /// A leg of connection `id` closed. `first` when it is the connection's first leg to close; `streams`
    /// are the stream ledgers the connection carried traffic for.
    mutating func closed(
        _ id: ConnectionID,
        side: Side,
        kind: TrafficEvent.CloseKind,
        at time: Int64,
        openedAt: Int64?,
        first: Bool,
        streams: [StreamLedger]
    ) {
        advance(to: time)
        // The run stopping the pair closes its connections: that is not the pair noticing a dead path (s78q4: the naive
        // client's run stopped 2 s after its partition, inside the kernel path's wait for a notice, and the stop's
        // closes counted as notices). What is still half-open then is settled as never noticed at the end.
        let stopped = stoppedAt.map { time >= $0 } ?? false
        for watch in open where !stopped && watch.halfOpen.contains(id) {
            let proxyCut = kind.isFaultCut
            if watch.mark.kind == "handoff", proxyCut, side == .client { continue }
            watch.halfOpen.remove(id)
            let lasted = watch.mark.kind == "handoff" ? max(0, time - (watch.end ?? watch.start)) : watch.halfOpenLasted(at: time)
            if proxyCut {
                watch.halfOpenUnnoticed += 1
                watch.halfOpenLongest = max(watch.halfOpenLongest, lasted)
            } else {
                // Only a heartbeat notices a partition or a stall; after a handoff the server may drop the old
                // session as soon as the client is back, which says nothing of its heartbeat.
                noticed(in: watch, after: lasted, byHeartbeat: watch.mark.kind != "handoff")
            }
        }
        guard first, let watch = blamed(at: time, openedAt: openedAt) else { return }
        watch.connectionsClosed += 1
        if watch.disruption == nil { watch.disruption = time }
        for ledger in streams where !ledger.resumeWaits.contains(where: { $0.watch === watch }) {
            ledger.resumeWaits.append((watch, ledger.highestDelivered))
            watch.streamsAffected += 1
            watch.waitingStreams += 1
        }
    }

    /// The least a dead path in the kernel waits, after its partition or stall ended, for what the pair did in it.
    static let noticeWaitFloor: Int64 = 1_000_000_000

    /// `count` of `watch`'s half-open connections were not noticed while it lasted.
    private func settleUnnoticed(_ watch: FaultWatch, count: Int, at time: Int64) {
        watch.halfOpenUnnoticed += count
        watch.halfOpenLongest = max(watch.halfOpenLongest, watch.halfOpenLasted(at: time))
    }

    /// Whether a fault still holds a connection half-open that the pair has not been seen to notice.
    var holdsHalfOpen: Bool { open.contains { !$0.halfOpen.isEmpty } }

    /// The pair carried a stream of half-open connection `id` on another connection at `time`: it left the old one, so
    /// it noticed it was dead, even though no close of it reached the proxy (on a dead path in the kernel an end's FIN
    /// waits behind its own unacknowledged bytes until the path comes back, as on a real network). Not for a handoff,
    /// whose client always moves on: only a close says the other end noticed.
    mutating func movedOn(from id: ConnectionID, at time: Int64) {
        advance(to: time)
        for watch in open where watch.mark.kind != "handoff" && watch.halfOpen.remove(id) != nil {
            noticed(in: watch, after: watch.halfOpenLasted(at: time), byHeartbeat: true)
        }
    }

    private mutating func noticed(in watch: FaultWatch, after lasted: Int64, byHeartbeat: Bool) {
        watch.halfOpenNoticed += 1
        halfOpenDurations.record(nanoseconds: lasted)
        if byHeartbeat { fastestNotice = min(fastestNotice ?? .max, lasted) }
        watch.halfOpenLongest = max(watch.halfOpenLongest, lasted)
    }

    /// A connection's path was dead for `seen.lasted` up to `time`: what its ends' TCPs met counts for the fault that made it
    /// so (the latest of the kinds that kill paths that was on when it died; none: a baseline's NAT, not a fault's).
    mutating func deadPathSeen(_ seen: DeadPathSeen, on id: ConnectionID, at time: Int64) {
        advance(to: time)
        let died = time - seen.lasted
        // The fault's mark is recorded as the proxy applies it: its start may follow the first drop by a little.
        func killed(_ watch: FaultWatch) -> Bool {
            FaultWatch.deadPathKinds.contains(watch.mark.kind) && watch.start <= died + Self.deadPathSlack
                && (watch.end.map { $0 + Self.deadPathSlack >= died } ?? true)
        }
        if let watch = open.last(where: killed) {
            watch.deadPath = watch.deadPath.map { $0.adding(seen) } ?? DeadPathFigures().adding(seen)
            if seen.inKernel { watch.diedInKernel.insert(id) }
        } else if let (watch, index) = settledDeadPathWatches.last(where: { killed($0.watch) }) {
            watch.deadPath = watch.deadPath.map { $0.adding(seen) } ?? DeadPathFigures().adding(seen)
            settled[index].deadPath = watch.deadPath
        }
    }

    /// How far a dead path's start and its fault's mark may lie apart.
    static let deadPathSlack: Int64 = 1_000_000_000

    /// A NAT forgot a connection at `time` (the first byte sent into the dead mapping): each of the `streams` it
    /// carried waits for a message past what it had delivered. The death is silent (no close), so it disrupts nothing
    /// by itself: a stream that went quiet and stayed so was not interrupted. It never resumed only if its producer
    /// sent past that point and nothing of it arrived by the end: an app stuck on the dead connection.
    mutating func natExpired(at time: Int64, streams: [StreamLedger]) {
        advance(to: time)
        guard let watch = open.last(where: { $0.mark.kind == "nat" && $0.start <= time }) else { return }
        silentWaits.removeAll { wait in !wait.ledger.resumeWaits.contains { $0.watch === wait.watch } }
        for ledger in streams where !ledger.resumeWaits.contains(where: { $0.watch === watch }) {
            ledger.resumeWaits.append((watch, ledger.highestDelivered))
            silentWaits.append(SilentWait(watch: watch, ledger: ledger, baseline: ledger.highestDelivered, since: time))
            watch.streamsAffected += 1
        }
    }

    /// `seq` was delivered for the first time on `ledger`, which has faults waiting for it to resume.
    mutating func delivered(_ seq: Int64, on ledger: StreamLedger, at time: Int64) {
        ledger.resumeWaits.removeAll { wait in
            guard seq > wait.baseline else { return false }
            if let index = silentWaits.firstIndex(where: { $0.watch === wait.watch && $0.ledger === ledger }) {
                let took = max(0, time - silentWaits[index].since)
                resume.record(nanoseconds: took)
                wait.watch.slowestResume = max(wait.watch.slowestResume ?? 0, took)
                silentWaits.remove(at: index)
                return true
            }
            guard let disruption = wait.watch.disruption, time >= disruption else { return false }
            let took = time - disruption
            resume.record(nanoseconds: took)
            wait.watch.slowestResume = max(wait.watch.slowestResume ?? 0, took)
            wait.watch.waitingStreams -= 1
            return true
        }
    }

    /// Closes herd windows that have passed and settled watches.
    mutating func advance(to time: Int64) {
        guard !open.isEmpty else { return }
        // Dead paths in the kernel that showed nothing of the pair noticing them since their fault ended: ridden out.
        for watch in open {
            guard let deadline = watch.noticeDeadline, time >= deadline else { continue }
            watch.noticeDeadline = nil
            if !watch.halfOpen.isEmpty { settleUnnoticed(watch, count: watch.halfOpen.count, at: time) }
            watch.halfOpen = []
        }
        for watch in open where !watch.spreadDone {
            if let disruption = watch.disruption, time - disruption > Self.spreadWindow { finishSpread(watch) }
        }
        while let first = open.first, first.settled {
            close(open.removeFirst(), at: time, final: false)
        }
    }

    private mutating func finishSpread(_ watch: FaultWatch) {
        watch.spreadDone = true
        if let spread = Self.spread(of: watch) { spreads.append(spread) }
        watch.attempts = []
    }

    private mutating func close(_ watch: FaultWatch, at time: Int64, final: Bool) {
        if !watch.spreadDone { finishSpread(watch) }
        if watch.halfOpenTotal > 0 {
            if !watch.halfOpen.isEmpty {
                settleUnnoticed(watch, count: watch.halfOpen.count, at: time)
                watch.halfOpen = []
            }
            halfOpenRecords.append(
                HalfOpenRecord(
                    occurrence: watch.mark.occurrence,
                    kind: watch.mark.kind,
                    connections: watch.halfOpenTotal,
                    noticed: watch.halfOpenNoticed,
                    unnoticed: watch.halfOpenUnnoticed,
                    longestS: Double(watch.halfOpenLongest) / 1e9
                )
            )
        }
        if final { neverResumed += watch.waitingStreams }
        settled.append(watch.impact)
        if FaultWatch.deadPathKinds.contains(watch.mark.kind) {
            settledDeadPathWatches.append((watch, settled.count - 1))
            if settledDeadPathWatches.count > Self.openLimit { settledDeadPathWatches.removeFirst() }
        }
    }

    /// The summary so far; `final` closes every open measurement (streams still waiting never resumed).
    func summary(at time: Int64, final: Bool) -> (RecoverySummary, [FaultImpact]) {
        // Only reads the open watches, so a checkpoint does not disturb the live state.
        var impacts = settled
        var halfOpen = halfOpenRecords
        var spreads = spreads
        var never = neverResumed
        for watch in open {
            impacts.append(watch.impact)
            if final {
                never += watch.waitingStreams
                if watch.halfOpenTotal > 0 {
                    let unnoticed = watch.halfOpenUnnoticed + watch.halfOpen.count
                    let longest = watch.halfOpen.isEmpty ? watch.halfOpenLongest : max(watch.halfOpenLongest, watch.halfOpenLasted(at: time))
                    halfOpen.append(
                        HalfOpenRecord(
                            occurrence: watch.mark.occurrence,
                            kind: watch.mark.kind,
                            connections: watch.halfOpenTotal,
                            noticed: watch.halfOpenNoticed,
                            unnoticed: unnoticed,
                            longestS: Double(longest) / 1e9
                        )
                    )
                }
                if !watch.spreadDone, let spread = Self.spread(of: watch) { spreads.append(spread) }
            }
        }
        if final {
            // Streams stuck on a connection a NAT forgot: sent into it, and nothing of them arrived since.
            for wait in silentWaits where wait.ledger.highestSent > wait.baseline {
                guard wait.ledger.resumeWaits.contains(where: { $0.watch === wait.watch }) else { continue }
                never += 1
                if let index = impacts.firstIndex(where: { $0.occurrence == wait.watch.mark.occurrence }) {
                    impacts[index].neverResumed += 1
                }
            }
        }
        impacts.sort { $0.occurrence < $1.occurrence }
        halfOpen.sort { $0.occurrence < $1.occurrence }
        spreads.sort { $0.occurrence < $1.occurrence }
        var summary = RecoverySummary()
        summary.reconnectS = reconnect.summary
        summary.resumeS = resume.summary
        summary.halfOpenS = halfOpenDurations.summary
        summary.neverResumed = never
        summary.halfOpen = halfOpen
        summary.reconnectSpread = spreads
        summary.noticedWithinS = fastestNotice.map { Double($0) / 1e9 }
        return (summary, impacts)
    }

    /// A thundering herd: most attempts inside one short window. Three or four clients whose full-jitter backoff
    /// happens to land together are not one: with that few, only a herd that also came at once (no backoff at all)
    /// counts; from five attempts on, a chance meeting in one window is too unlikely to matter.
    static func isHerd(densest: Int, attempts: Int, firstAfter: Int64) -> Bool {
        densest >= 3 && Double(densest) >= 0.8 * Double(attempts) && (attempts >= 5 || firstAfter <= herdWindow)
    }

    private static func spread(of watch: FaultWatch) -> ReconnectSpread? {
        guard watch.connectionsClosed >= 2, let disruption = watch.disruption, let first = watch.attempts.first,
            let last = watch.attempts.last
        else { return nil }
        var densest = 0
        var low = 0
        for high in watch.attempts.indices {
            while watch.attempts[high] - watch.attempts[low] > herdWindow { low += 1 }
            densest = max(densest, high - low + 1)
        }
        let attempts = watch.attempts.count
        return ReconnectSpread(
            occurrence: watch.mark.occurrence,
            kind: watch.mark.kind,
            connectionsClosed: watch.connectionsClosed,
            attempts: attempts,
            firstS: Double(first - disruption) / 1e9,
            spreadS: Double(last - first) / 1e9,
            densest: densest,
            windowS: Double(herdWindow) / 1e9,
            herd: Self.isHerd(densest: densest, attempts: attempts, firstAfter: first - disruption)
        )
    }
}

/// A stream a NAT's silent death caught: waiting since `since` for a message past `baseline` (what it had delivered).
struct SilentWait {
    let watch: FaultWatch
    let ledger: StreamLedger
    let baseline: Int64
    let since: Int64
}
