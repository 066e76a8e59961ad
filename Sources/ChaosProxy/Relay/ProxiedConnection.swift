import ChaosCore
import NIOCore
import NIOPosix

/// One client connection and its upstream leg, with both legs' relays and shapers, the faults
/// active on it, and how each leg ended.
///
/// Sendable because every mutable property is touched only on `eventLoop` (each entry point
/// either runs there, as channel callbacks do, or hops there through `execute`), which
/// `eventLoop.preconditionInEventLoop()` checks in debug builds.
final class ProxiedConnection: @unchecked Sendable {
    let id: ConnectionID
    let eventLoop: any EventLoop
    let endpoints: ConnectionEndpoints
    private let sink: (any TrafficEventSink)?
    /// The sink, when it wants byte events (and acknowledgements).
    let trafficSink: (any TrafficEventSink)?
    let clock: RunClock
    private let counters: ProxyCounters
    private let onFinished: @Sendable (ConnectionID) -> Void
    private let onCut: @Sendable (ConnectionID) -> Void

    let legs: [Side: Leg]
    private var conditions: [Int: (DirectionSet, ShapingCondition)] = [:]
    private var baseline: LinkProfile?
    var state = CloseState()
    /// What each leg's peer acknowledged of what was written to it (by ``Side/slot``); kept only
    /// when the sink wants bytes.
    var acknowledgements = [AcknowledgementTracker(dialled: false), AcknowledgementTracker(dialled: true)]
    /// Each leg's next acknowledgement poll, while bytes are outstanding.
    var acknowledgementPolls: [Scheduled<Void>?] = [nil, nil]
    private var lingerTask: Scheduled<Void>?

    /// One leg: its channel, relay and the shaper of bytes written to it.
    struct Leg {
        let channel: any Channel
        let relay: RelayHandler
        let shaper: ShapingHandler
    }

    /// What an epoll relay had already done for a connection that moved to NIO.
    struct Adoption: Sendable {
        /// Bytes read from the server (and recorded) but not yet written to the client.
        let toClient: [UInt8]
        /// Bytes read from the client (and recorded) but not yet written to the server.
        let toServer: [UInt8]
        /// The legs whose `closed` event was already recorded.
        let closeRecorded: Set<Side>
        /// What each leg's peer acknowledged so far (by ``Side/slot``).
        let acknowledgements: [AcknowledgementTracker]
    }

    /// How far each leg got towards closing.
    struct CloseState {
        var eofFrom: Set<Side> = []
        var recorded: Set<Side> = []
        var inactive: Set<Side> = []
        /// Nothing passes any more (a fault cut it, or a reset was passed on).
        var cut = false
        /// A fault cut it (rather than a peer's reset).
        var cutByFault = false
        var finished = false
    }

    init(id: ConnectionID, endpoints: ConnectionEndpoints, client: Leg, server: Leg, sink: (any TrafficEventSink)?,
         clock: RunClock, counters: ProxyCounters, onCut: @escaping @Sendable (ConnectionID) -> Void,
         onFinished: @escaping @Sendable (ConnectionID) -> Void) {
        self.id = id
        self.eventLoop = client.channel.eventLoop
        self.endpoints = endpoints
        self.legs = [.client: client, .server: server]
        self.sink = sink
        self.trafficSink = sink?.recordsTraffic == true ? sink : nil
        self.clock = clock
        self.counters = counters
        self.onFinished = onFinished
        self.onCut = onCut
    }

    /// Wires the relays and starts reading both legs. Call on the event loop. An `adopted`
    /// connection was opened (and counted) by an epoll relay; its pending bytes go first.
    func start(baseline: LinkProfile?, conditions: [Int: (DirectionSet, ShapingCondition)], adopted: Adoption? = nil) {
        eventLoop.preconditionInEventLoop()
        let client = legs[.client]!, server = legs[.server]!
        client.relay.partner = server.relay
        server.relay.partner = client.relay
        client.relay.connection = self
        server.relay.connection = self
        if let sink = trafficSink {
            let id = self.id, clock = self.clock
            for side in Side.allCases {
                let shaper = legs[side]!.shaper
                shaper.onDelivered = { [weak self] buffer in
                    sink.record(TrafficEvent(time: clock.now(), connection: id, kind: .written(side, Array(buffer.readableBytesView))))
                    self?.wrote(buffer.readableBytes, to: side)
                }
                shaper.holdShutdown = { [weak self] proceed in
                    guard let self else { return proceed() }
                    self.whenAcknowledged(side, then: proceed)
                }
            }
        }
        if let adopted {
            state.recorded = adopted.closeRecorded
            acknowledgements = adopted.acknowledgements
        } else {
            sink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .opened(endpoints)))
            counters.connectionOpened()
        }
        self.baseline = baseline
        self.conditions = conditions
        reshape()
        if let adopted {
            for (side, bytes) in [(Side.client, adopted.toClient), (.server, adopted.toServer)] where !bytes.isEmpty {
                legs[side]!.relay.deliver(ByteBuffer(bytes: bytes))
                legs[side]!.channel.flush()
            }
        }
        for side in Side.allCases { legs[side]!.relay.drainEarlyArrivals() }
        for side in Side.allCases where !state.inactive.contains(side) { legs[side]!.relay.startReading() }
    }

    // MARK: shaping

    /// Adds (or replaces) the condition of fault occurrence `key` on `directions`.
    func addCondition(_ condition: ShapingCondition, key: Int, directions: DirectionSet) {
        eventLoop.preconditionInEventLoop()
        conditions[key] = (directions, condition)
        reshape()
    }

    /// Removes the condition of fault occurrence `key`.
    func removeCondition(key: Int) {
        eventLoop.preconditionInEventLoop()
        guard conditions.removeValue(forKey: key) != nil else { return }
        reshape()
    }

    private func reshape() {
        guard !state.cut else { return }
        let ordered = conditions.sorted { $0.key < $1.key }.map(\.value)
        for direction in Direction.allCases {
            var active = ordered.filter { $0.0.contains(direction) }.map(\.1)
            if let baseline { active.insert(.profile(baseline), at: 0) }
            let settings = ShapingCondition.combine(active, direction: direction)
            legs[direction.consumer]!.shaper.apply(settings)
        }
    }

    // MARK: faults that cut

    /// RST to both sides.
    func reset() {
        eventLoop.preconditionInEventLoop()
        guard beginCut() else { return }
        abort(.client)
        abort(.server)
    }

    /// Ends whatever is still open with RST (the proxy is stopping), whether or not a fault cut it.
    func terminate() {
        eventLoop.preconditionInEventLoop()
        state.cut = true
        lingerTask?.cancel()
        for side in Side.allCases where !state.inactive.contains(side) { abortQuietly(side) }
        stopAcknowledgementPolls()
    }

    /// FIN to both sides; what they still send is read and dropped until they close.
    func closeBoth() {
        eventLoop.preconditionInEventLoop()
        guard beginCut() else { return }
        for side in Side.allCases {
            let leg = legs[side]!
            pollAcknowledgements(side)
            record(.closed(side, .cutByFault), side: side)
            leg.shaper.discardHeld()
            leg.relay.discardsReads = true
            leg.channel.close(mode: .output, promise: nil)
        }
        scheduleLingerAbort(after: .seconds(5), sides: Side.allCases)
    }

    /// RST to `side`; the other leg stays open (half-open: it never saw a FIN) for `linger`, its
    /// bytes read and dropped, then it is reset.
    func cut(_ side: Side, linger: ChaosDuration) {
        eventLoop.preconditionInEventLoop()
        guard beginCut() else { return }
        abort(side)
        let other = legs[side.other]!
        other.shaper.discardHeld()
        other.relay.discardsReads = true
        scheduleLingerAbort(after: .nanoseconds(linger.nanoseconds), sides: [side.other])
    }

    private func beginCut() -> Bool {
        guard !state.cut, !state.finished else { return false }
        state.cut = true
        state.cutByFault = true
        counters.connectionCut()
        onCut(id)
        return true
    }

    private func abort(_ side: Side) {
        let leg = legs[side]!
        pollAcknowledgements(side, beforeReset: true)
        record(.closed(side, .cutByFault), side: side)
        leg.shaper.discardHeld()
        leg.relay.discardsReads = true
        leg.channel.closeWithReset()
    }

    private func scheduleLingerAbort(after delay: TimeAmount, sides: [Side]) {
        lingerTask?.cancel()
        lingerTask = eventLoop.scheduleTask(in: delay) { [self] in
            for side in sides where !state.inactive.contains(side) { abort(side) }
        }
    }

    // MARK: relay callbacks

    /// Bytes read from `side`; returns false when they must be dropped (the leg is being cut).
    func didRead(_ buffer: ByteBuffer, from side: Side) -> Bool {
        if legs[side]!.relay.discardsReads { return false }
        counters.add(bytes: buffer.readableBytes, producedBy: side == .client)
        trafficSink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .read(side, Array(buffer.readableBytesView))))
        return true
    }

    /// `side` sent FIN: pass the half-close on, behind any held data.
    func didReceiveEOF(from side: Side) {
        pollAcknowledgements(side)
        state.eofFrom.insert(side)
        record(.closed(side, .fin), side: side)
        if !state.cut { legs[side.other]!.relay.shutdownOutput() }
    }

    /// A leg failed: a reset from its peer is passed on as a reset to the other leg.
    func legFailed(_ side: Side, error: any Error) {
        let reset = (error as? IOError).map { $0.errnoCode == ECONNRESET || $0.errnoCode == EPIPE } ?? false
        pollAcknowledgements(side)
        record(.closed(side, reset ? .reset : .error), side: side)
        let passOn = !state.cut
        state.cut = true // nothing more passes either way: the reset is passed on
        legs[side]!.channel.close(promise: nil)
        if passOn, !state.inactive.contains(side.other) { abortQuietly(side.other) }
    }

    private func abortQuietly(_ side: Side) {
        let leg = legs[side]!
        pollAcknowledgements(side, beforeReset: true)
        leg.shaper.discardHeld()
        leg.channel.closeWithReset()
    }

    /// A leg's channel closed. Without an error first, its peer closed in order (NIO folds the
    /// EOF into the closure when our side had already sent FIN): pass that on as a half-close.
    func legInactive(_ side: Side) {
        state.inactive.insert(side)
        if !state.cut, !state.eofFrom.contains(side) { didReceiveEOF(from: side) }
        record(.closed(side, state.cutByFault ? .cutByFault : state.cut ? .reset : .fin), side: side)
        if state.inactive.count == 2, !state.finished {
            state.finished = true
            lingerTask?.cancel()
            stopAcknowledgementPolls()
            onFinished(id)
        }
    }

    func record(_ kind: TrafficEvent.Kind, side: Side) {
        guard state.recorded.insert(side).inserted else { return }
        sink?.record(TrafficEvent(time: clock.now(), connection: id, kind: kind))
    }
}

extension Channel {
    /// Closes with RST rather than FIN (SO_LINGER 0), as a cut connection or a passed-on reset must.
    func closeWithReset() {
        guard isActive, let provider = self as? any SocketOptionProvider else {
            close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in self.close(promise: nil) }
    }
}
