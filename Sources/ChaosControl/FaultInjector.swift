package import ChaosCore
package import ChaosProxy
package import Logging
import NIOCore
import Synchronization

/// Applies a ``Timeline`` to running proxies at the times it names, on the run's clock, and
/// records what each occurrence actually hit. Cancelling ``run()`` lifts every active fault.
package final class FaultInjector: Sendable {
    /// What happened when an occurrence was applied.
    package struct Applied: Sendable, Equatable, Codable {
        /// The occurrence's index in the timeline.
        package var occurrence: Int
        /// When it was really applied, nanoseconds on the run clock.
        package var appliedAt: Int64
        /// How many live connections it hit (for run-wide faults: those live when it began).
        package var connections: Int
        /// Connections opened while it lasted, which it reached too (a fault on every connection, now and new); nil
        /// until it ended, and for a fault that reaches only the connections live when it began.
        package var openedWhileOn: Int? = nil
    }

    private let timeline: Timeline
    private let skippingBefore: Int64
    private let number: Int
    private let proxies: [any FaultTarget]
    private let clock: any FaultClock
    private let sink: (any TrafficEventSink)?
    private let logger: Logger
    private let applied = Mutex<[Applied]>([])
    /// Occurrence index → the proxies' ``FaultTarget/connectionsOpened`` when it began (faults that reach new connections).
    private let openedAtBegin = Mutex<[Int: Int64]>([:])
    private let origin = Mutex<Int64>(0)
    private struct BlackoutKey: Hashable {
        var occurrence: Int
        var proxy: ObjectIdentifier
    }
    /// Handoffs with a dead WiFi, by occurrence index and proxy: the task that begins the blackout (refusing new connections)
    /// once the dead WiFi is over; it returns whether it did.
    private let blackouts = Mutex<[BlackoutKey: Task<Bool, Never>]>([:])
    private let onApplied: (@Sendable (FaultOccurrence, Applied) -> Void)?
    /// The pair, for a fault that acts on its processes (`restart`); nil: such faults touch nothing.
    private let pair: (any PairFaultTarget)?
    /// Pauses of the schedule (the live page's, a replay's); nil: it runs as planned.
    package let schedule: FaultSchedule?
    /// Where the schedule is, for ``upcoming(_:)`` (kept only with a schedule).
    private let cursor = Mutex<Cursor?>(nil)
    /// Where what each occurrence touched is counted by kind (`GET /metrics`); nil: nowhere.
    private let tally: FaultTally?

    /// An injector for `timeline` over `proxies`; `onApplied` is told of each occurrence as it begins.
    /// `number` tells its shaping apart from other injectors' on the same proxies (0: the run's own
    /// timeline; a control-API fault: its id). `skippingBefore`: the clock's time when the timeline is handed over
    /// late (a control-API fault, whose times count from the proxy's start): occurrences over by then are skipped.
    /// `tally` counts, by kind, the occurrences begun and the connections they touched.
    package init(
        timeline: Timeline,
        skippingBefore: Int64 = 0,
        number: Int = 0,
        proxies: [any FaultTarget],
        clock: any FaultClock,
        sink: (any TrafficEventSink)?,
        logger: Logger = Logger(label: "chaos.faults"),
        pair: (any PairFaultTarget)? = nil,
        schedule: FaultSchedule? = nil,
        tally: FaultTally? = nil,
        onApplied: (@Sendable (FaultOccurrence, Applied) -> Void)? = nil
    ) {
        self.pair = pair
        self.schedule = schedule
        self.tally = tally
        self.timeline = timeline
        self.skippingBefore = skippingBefore
        self.number = number
        self.proxies = proxies
        self.clock = clock
        self.sink = sink
        self.logger = logger
        self.onApplied = onApplied
    }

    /// An injector of occurrences applied one at a time (``apply(_:)``, ``lift(_:)``) rather than from a timeline:
    /// a Toxiproxy toxic, which lasts until it is deleted.
    package convenience init(
        number: Int,
        proxies: [any FaultTarget],
        clock: any FaultClock,
        sink: (any TrafficEventSink)?,
        logger: Logger = Logger(label: "chaos.faults")
    ) {
        self.init(
            timeline: Timeline(seed: 0, duration: .zero, occurrences: []),
            number: number,
            proxies: proxies,
            clock: clock,
            sink: sink,
            logger: logger
        )
    }

    /// Every occurrence applied so far.
    package var appliedSoFar: [Applied] { applied.withLock { $0 } }

    /// The clock's time at which the timeline's zero is: 0, or the moment ``run(from:)`` was told (a run whose pair
    /// says `ready: connected` starts its timeline once the clients are connected).
    package var timelineOrigin: Int64 { origin.withLock { $0 } }

    /// An active occurrence's end (on the timeline's clock: its planned end, later by the pauses before it began),
    /// ordered by time and then by index (the order a timeline ends them in).
    private struct PendingEnd: Comparable, Sendable {
        var occurrence: FaultOccurrence
        var at: ChaosDuration
        static func < (lhs: PendingEnd, rhs: PendingEnd) -> Bool {
            (lhs.at, lhs.occurrence.index) < (rhs.at, rhs.occurrence.index)
        }
        static func == (lhs: PendingEnd, rhs: PendingEnd) -> Bool { lhs.occurrence.index == rhs.occurrence.index }
    }

    /// The next thing to do: end an active occurrence, or begin the timeline's next one, and when (the timeline's
    /// clock). At the same time, ends come before starts (a fault that ends as another begins is lifted first).
    private enum Action {
        case begin(FaultOccurrence, at: ChaosDuration)
        case end(PendingEnd)
        var at: ChaosDuration {
            switch self {
            case .begin(_, let at): at
            case .end(let end): end.at
            }
        }
    }

    /// How often a paused schedule looks whether it was resumed.
    static let pausedPoll: Int64 = 100_000_000

    /// Applies the timeline, its zero at `timelineOrigin` on the clock, until its end (or until cancelled, which lifts
    /// active faults). The timeline is drawn as time reaches it: memory is the active occurrences, whatever the run's
    /// length. With a ``FaultSchedule``, no occurrence begins while it is paused, and each begins later by the pauses
    /// before it.
    package func run(from timelineOrigin: Int64 = 0) async {
        origin.withLock { $0 = timelineOrigin }
        schedule?.start(origin: timelineOrigin)
        var upcoming = timeline.makeIterator()
        var nextStart = next(from: &upcoming)
        var ends = MinHeap<PendingEnd>()
        var active: [Int: FaultOccurrence] = [:]
        var handoffTargets: [Int: [ObjectIdentifier: [ConnectionID]]] = [:]
        if schedule != nil { cursor.withLock { $0 = Cursor(rest: upcoming, next: nextStart) } }
        while true {
            let now = ChaosDuration.nanoseconds(clock.now() - timelineOrigin)
            let paused = schedule?.isPaused(at: now) ?? false
            let startAt = nextStart.map { schedule?.begin(ofPlanned: $0.at, now: now) ?? $0.at }
            let action: Action
            if let end = ends.min, paused || startAt.map({ end.at <= $0 }) ?? true {
                action = .end(end)
            } else if !paused, let start = nextStart, let startAt {
                action = .begin(start, at: startAt)
            } else if paused {
                // Nothing to end, nothing may begin: look again shortly.
                do { try await clock.sleep(until: clock.now() + Self.pausedPoll) } catch { break }
                continue
            } else {
                break
            }
            if action.at > now {
                // Not yet: sleep until then, and look again (a pause or a resume meanwhile moves what comes next).
                let due = timelineOrigin + action.at.nanoseconds
                do { try await clock.sleep(until: paused ? min(due, clock.now() + Self.pausedPoll) : due) } catch { break }
                if schedule != nil { continue }
            } else {
                // Behind the timeline (a fault every millisecond on a loaded machine): what is due is applied without
                // a sleep, so the loop lets the rest of its executor run between actions, or it would hold a thread
                // of the shared pool for as long as it stays behind (the control API's answers waited on it).
                await Task.yield()
                if Task.isCancelled { break }
            }
            switch action {
            case .end(let pending):
                _ = ends.popMin()
                active.removeValue(forKey: pending.occurrence.index)
                await end(pending.occurrence, handoffTargets: handoffTargets.removeValue(forKey: pending.occurrence.index) ?? [:])
            case .begin(let occurrence, let at):
                nextStart = next(from: &upcoming)
                if schedule != nil { cursor.withLock { $0 = Cursor(rest: upcoming, next: nextStart) } }
                let (count, targets) = await begin(occurrence)
                if !occurrence.kind.endsAsItBegins {
                    active[occurrence.index] = occurrence
                    ends.insert(PendingEnd(occurrence: occurrence, at: at + occurrence.lasts))
                }
                if occurrence.kind == .handoff { handoffTargets[occurrence.index] = targets }
                if occurrence.kind.endsAsItBegins {
                    // An instant fault ends as it begins: every started mark has its end.
                    sink?.record(TrafficEvent(time: clock.now(), connection: 0, kind: .faultEnded(mark(occurrence))))
                }
                let record = Applied(occurrence: occurrence.index, appliedAt: clock.now(), connections: count)
                // Tallied first: a caller that waits for appliedSoFar (POST /faults) then finds it on /metrics.
                tally?.began(occurrence.kind.rawValue, connections: count, lasting: !occurrence.kind.endsAsItBegins)
                applied.withLock { $0.append(record) }
                if reachesNewConnections(occurrence) {
                    let opened = proxies(for: occurrence).map(\.connectionsOpened).reduce(0, +)
                    openedAtBegin.withLock { $0[occurrence.index] = opened }
                }
                onApplied?(occurrence, record)
            }
        }
        // Cancelled or finished: lift whatever is still on.
        for occurrence in active.values.sorted(by: { $0.index < $1.index }) {
            await end(occurrence, handoffTargets: handoffTargets[occurrence.index] ?? [:], cancelled: true)
        }
    }

    /// The timeline's next occurrence from `iterator` that has not ended before ``skippingBefore``.
    private func next(from iterator: inout Timeline.Iterator) -> FaultOccurrence? {
        while let occurrence = iterator.next() {
            if occurrence.end.nanoseconds >= skippingBefore { return occurrence }
        }
        return nil
    }

    /// Where the schedule is: the occurrence to begin next, and the iterator of those after it (a copy is read by
    /// ``upcoming(_:)``; the injector's own moves on).
    struct Cursor: Sendable {
        var rest: Timeline.Iterator
        var next: FaultOccurrence?
    }

    /// The next `count` occurrences not begun yet, each with when it begins on the timeline's clock if nothing more
    /// is paused (nil while the schedule is paused). Only with a ``FaultSchedule`` (the live page's); otherwise none.
    package func upcoming(_ count: Int) -> [(occurrence: FaultOccurrence, begins: ChaosDuration?)] {
        guard let schedule, var cursor = cursor.withLock({ $0 }) else { return [] }
        let now = schedule.now
        let paused = schedule.isPaused(at: now)
        var list: [(occurrence: FaultOccurrence, begins: ChaosDuration?)] = []
        while list.count < count, let occurrence = cursor.next {
            list.append((occurrence, paused ? nil : schedule.begin(ofPlanned: occurrence.at, now: now)))
            cursor.next = next(from: &cursor.rest)
        }
        return list
    }

    /// The occurrence's mark in the event stream (a control-API fault's numbered apart from the run's).
    private func mark(_ occurrence: FaultOccurrence) -> FaultMark {
        number == 0 ? occurrence.mark : occurrence.mark(apiFault: number)
    }

    private func proxies(for occurrence: FaultOccurrence) -> [any FaultTarget] {
        proxies.filter { occurrence.proxy == nil || $0.name == occurrence.proxy }
    }

    /// The live connections an occurrence hits; nil: every connection, now and new (each that ``draw(_:)`` reaches).
    private func targets(_ occurrence: FaultOccurrence, on proxy: any FaultTarget) -> [ConnectionID]? {
        switch occurrence.targets {
        case .all, .each: nil
        case .count, .fraction: proxy.pickTargets(occurrence.targets, seed: occurrence.seed)
        }
    }

    /// The per-connection draw of an occurrence that reaches each connection with a probability.
    private func draw(_ occurrence: FaultOccurrence) -> ConnectionDraw? {
        guard case .each(let probability) = occurrence.targets else { return nil }
        return ConnectionDraw(probability: probability, seed: occurrence.seed)
    }

    /// Applies `occurrence` now, whatever its time, until ``lift(_:)``; returns what it hit. Its shaping is keyed
    /// by this injector's number and the occurrence's index.
    @discardableResult
    package func apply(_ occurrence: FaultOccurrence) async -> Applied {
        let (count, _) = await begin(occurrence)
        let record = Applied(occurrence: occurrence.index, appliedAt: clock.now(), connections: count)
        applied.withLock { $0.append(record) }
        tally?.began(occurrence.kind.rawValue, connections: count, lasting: true)
        return record
    }

    /// Lifts an occurrence that ``apply(_:)`` applied.
    package func lift(_ occurrence: FaultOccurrence) async {
        await end(occurrence, handoffTargets: [:], cancelled: true)
    }

    /// Starts an occurrence; returns how many connections it hit and, for a handoff, whom.
    private func begin(_ occurrence: FaultOccurrence) async -> (Int, [ObjectIdentifier: [ConnectionID]]) {
        // The connections it is aimed at are picked first: its mark names them (what it can leave half-open).
        let aimed = proxies(for: occurrence).map { ($0, targets(occurrence, on: $0)) }
        var started = mark(occurrence)
        switch occurrence.targets {
        case .count, .fraction: started.connections = aimed.flatMap { $0.1 ?? [] }.sorted()
        case .each: started.draw = draw(occurrence)
        case .all: break
        }
        sink?.record(TrafficEvent(time: clock.now(), connection: 0, kind: .faultStarted(started)))
        logger.info(
            "fault",
            metadata: [
                "fault.kind": "\(occurrence.kind.rawValue)", "fault.index": "\(occurrence.index)",
                "fault.detail": "\(occurrence.effect.summary)",
            ]
        )
        var hit = 0
        var handoff: [ObjectIdentifier: [ConnectionID]] = [:]
        if case .restart(_, let signal) = occurrence.effect {
            // The server's connections through every proxy end with it.
            let live = proxies.map { $0.liveConnections.count }.reduce(0, +)
            let stopped = await pair?.stopServer(signal) ?? false
            return (stopped ? live : 0, [:])
        }
        for (proxy, ids) in aimed {
            let key = ShapingKey(timeline: number, occurrence: occurrence.index)
            switch occurrence.effect {
            case .disconnect(let mode, let linger):
                hit += await proxy.disconnect(ids, mode: mode, linger: linger)
            case .rebind:
                hit += await proxy.rebindFlows(ids)
            case .refuse:
                await proxy.beginRefusing()
            case .handshake(let mode):
                proxy.beginHandshakeFault(mode)
            case .handoff(_, _, _, _, let deadWiFi, _):
                // Blackout (and a dead WiFi before it): nothing passes on the connections it hits (and on new ones,
                // when it hits all).
                hit += await proxy.addShaping(occurrence.effect, key: key, to: ids)
                handoff[ObjectIdentifier(proxy)] = ids ?? proxy.liveConnections
                if let deadWiFi { beginBlackout(occurrence, after: deadWiFi, on: proxy) }
            case .latency, .bandwidth, .partition, .stall, .slice, .link, .loss, .mtu, .radio, .nat, .duplicate, .reorder, .slowClose,
                .limitData, .resetPeer, .timeout:
                hit += await proxy.addShaping(occurrence.effect, key: key, to: ids, draw: draw(occurrence))
            case .protocolFault(let fault) where occurrence.lasts > .zero:
                // A fault that lasts lies in wait on every connection, live and new, until it ends: the connections
                // it hit are those it caught, counted when it ends.
                _ = await proxy.beginWaitingFault(fault, key: key)
            case .protocolFault(let fault):
                hit += await proxy.protocolClose(ids, fault)
            case .restart:
                break  // handled above: it acts on the pair, not on the proxies
            }
        }
        return (hit, handoff)
    }

    /// A handoff's dead WiFi ends `after` its start: the blackout begins, in which the phone has no network (new
    /// connections are refused).
    private func beginBlackout(_ occurrence: FaultOccurrence, after deadWiFi: ChaosDuration, on proxy: any FaultTarget) {
        let at = clock.now().saturatingAdding(deadWiFi.nanoseconds)
        let clock = self.clock
        let task = Task<Bool, Never> {
            do { try await clock.sleep(until: at) } catch { return false }
            await proxy.beginRefusing()
            return true
        }
        blackouts.withLock { $0[BlackoutKey(occurrence: occurrence.index, proxy: ObjectIdentifier(proxy))] = task }
    }

    /// Ends a handoff's blackout task; returns whether it began refusing (the caller then ends that).
    private func endBlackout(_ occurrence: FaultOccurrence, on proxy: any FaultTarget) async -> Bool {
        let key = BlackoutKey(occurrence: occurrence.index, proxy: ObjectIdentifier(proxy))
        guard let task = blackouts.withLock({ $0.removeValue(forKey: key) }) else { return false }
        task.cancel()
        return await task.value
    }

    private func end(
        _ occurrence: FaultOccurrence,
        handoffTargets: [ObjectIdentifier: [ConnectionID]],
        cancelled: Bool = false
    ) async {
        // A server down at the run's end stays down: the pair is being stopped.
        if case .restart = occurrence.effect, !cancelled { await pair?.startServer() }
        // A lasting protocol fault's connections are those it caught while it lay in wait.
        var caught = 0
        for proxy in proxies(for: occurrence) {
            switch occurrence.effect {
            case .protocolFault where occurrence.lasts > .zero:
                let here = await proxy.endWaitingFault(key: ShapingKey(timeline: number, occurrence: occurrence.index))
                caught += here
                applied.withLock { records in
                    if let at = records.lastIndex(where: { $0.occurrence == occurrence.index }) { records[at].connections += here }
                }
            case .disconnect, .rebind, .protocolFault, .restart: break
            case .refuse: await proxy.endRefusing()
            case .handshake(let mode): proxy.endHandshakeFault(mode)
            case .handoff(_, let to, _, let linger, let deadWiFi, let newAddress):
                let refused = await endBlackout(occurrence, on: proxy)
                if !cancelled {
                    // The address changed: the client side is reset, the server side never hears of it,
                    // and what was held in the blackout is gone with the old address. After a dead WiFi, the
                    // connections made on it went the old way too.
                    var old = handoffTargets[ObjectIdentifier(proxy)] ?? []
                    if deadWiFi != nil, targets(occurrence, on: proxy) == nil { old = Array(Set(old).union(proxy.liveConnections)).sorted() }
                    _ = await proxy.disconnect(old, mode: .clientOnly, linger: linger)
                    proxy.setBaseline(to)
                    if let newAddress, let address = proxy.changeSourceAddress(pool: newAddress) {
                        logger.info("handoff: new upstream connections come from \(address)", metadata: ["proxy.name": "\(proxy.name)"])
                    }
                    // A UDP flow has no connection to reset: the phone's new network carries it on from a new
                    // upstream-facing socket (from the new address, when given), and the server's answers to the old
                    // one go nowhere; what survives that is QUIC's connection migration (a TCP proxy has no flows).
                    _ = await proxy.rebindFlows(old)
                }
                if refused { await proxy.endRefusing() }
                await proxy.removeShaping(key: ShapingKey(timeline: number, occurrence: occurrence.index))
            default:
                await proxy.removeShaping(key: ShapingKey(timeline: number, occurrence: occurrence.index))
            }
        }
        sink?.record(TrafficEvent(time: clock.now(), connection: 0, kind: .faultEnded(mark(occurrence))))
        var reached = 0
        if let before = openedAtBegin.withLock({ $0.removeValue(forKey: occurrence.index) }) {
            let opened = Int(proxies(for: occurrence).map(\.connectionsOpened).reduce(0, +) - before)
            applied.withLock { records in
                if let at = records.lastIndex(where: { $0.occurrence == occurrence.index }) { records[at].openedWhileOn = opened }
            }
            reached = opened
        }
        tally?.ended(occurrence.kind.rawValue, reached: reached + caught)
    }

    /// Whether an occurrence reaches connections opened while it is on: a lasting fault on every connection.
    private func reachesNewConnections(_ occurrence: FaultOccurrence) -> Bool {
        switch occurrence.effect {
        case .disconnect, .rebind, .protocolFault, .refuse, .handshake, .restart: return false
        default: break
        }
        switch occurrence.targets {
        case .all, .each: return true
        case .count, .fraction: return false
        }
    }
}
