import ChaosCore
import NIOCore
import NIOPosix
import NIOSSL

/// One client connection and its upstream leg, with both legs' relays and shapers and the faults
/// active on it. What passes, when a FIN or a reset is passed on, what a cut does and what is
/// recorded are the ``RelayStateMachine``'s rules; this type performs its actions on NIO channels.
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
    let counters: ProxyCounters
    private let onFinished: @Sendable (ConnectionID) -> Void
    let onCut: @Sendable (ConnectionID) -> Void

    let legs: [Side: Leg]
    /// The shaping faults active on it, by occurrence index.
    private var shaping: [ShapingKey: FaultEffect] = [:]
    private var baseline: LinkProfile?
    var machine = RelayStateMachine(connected: true)
    /// What each leg's peer acknowledged of what was written to it (by ``Side/slot``); kept only
    /// when the sink wants bytes.
    var acknowledgements = [AcknowledgementTracker(dialled: false), AcknowledgementTracker(dialled: true)]
    /// Each leg's next acknowledgement poll, while bytes are outstanding.
    var acknowledgementPolls: [Scheduled<Void>?] = [nil, nil]
    private var lingerTask: Scheduled<Void>?
    /// The frames of each direction, when the proxy follows the connection's protocol (for `ws-close` and `goaway`).
    var protocolFrames: ProtocolFrames?
    /// Told when a lasting protocol fault lying in wait catches the connection (the proxy counts them by fault).
    var onCaught: ((ShapingKey) -> Void)?
    /// The timers of faults that act after a time (timeout, reset_peer), by key (see `ProxiedConnection+Faults.swift`).
    var faultTimers: [ShapingKey: Scheduled<Void>] = [:]
    /// Per leg (by ``Side/slot``), for a TLS leg: where its plaintext bytes went on the wire, so that an acknowledged
    /// wire offset says which plaintext was delivered.
    var recordMaps: [TLSRecordMap?] = [nil, nil]
    /// A `disconnect mode: truncate` cut it: its TLS legs end with a FIN and no close_notify.
    var truncating = false
    /// Told when a TLS leg fails in TLS (an alert after the handshake: an upstream that wants a client certificate).
    var onTLSFailure: ((Side, any Error) -> Void)?
    /// The directions whose path is dead now (see `ProxiedConnection+DeadPath.swift`), and the legs' flows the kernel
    /// was asked to drop (kept: a closed channel no longer knows its addresses).
    var deadDirections: Set<Direction> = []
    /// The directions whose segments the kernel's loss queue draws (``KernelLoss``), with their models.
    var kernelLossModels: [Direction: LossModel] = [:]
    var kernelFlows: (client: KernelFlow?, server: KernelFlow?)?
    /// Whether this connection's dead path and loss may go to the kernel (``ProxyServer/Options/deadPathInKernel``).
    let deadPathInKernel: Bool
    /// Where the kernel drops this connection's dead path and loss (nil: the proxy holds and emulates them). Probed
    /// the first time a fault asks, not as the connection is accepted: a run no fault kills a path of runs no `nft`.
    var kernelDeadPath: KernelDeadPath? {
        guard deadPathInKernel else { return nil }
        let kernel = KernelDeadPath.shared
        return kernel.availability == .kernel ? kernel : nil
    }
    /// A fault's cut lifted the dead path: the kernel drops nothing of this connection any more.
    var deadPathLifted = false
    /// The dead path on it now, and what its legs' TCPs counted when it began (see `DeadPathEpisode.swift`).
    var deadPathEpisode: DeadPathEpisode?
    /// The emulated mobile path both directions share (its NAT may die).
    private(set) var path: ConnectionPath?
    /// What the legs about to be reset still hold, read first (see `ProxiedConnection+ResetDrain.swift`).
    var resetDrain = ResetDrain()

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

    init(
        id: ConnectionID,
        endpoints: ConnectionEndpoints,
        client: Leg,
        server: Leg,
        sink: (any TrafficEventSink)?,
        clock: RunClock,
        counters: ProxyCounters,
        deadPathInKernel: Bool,
        onCut: @escaping @Sendable (ConnectionID) -> Void,
        onFinished: @escaping @Sendable (ConnectionID) -> Void
    ) {
        self.deadPathInKernel = deadPathInKernel
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

    /// Records what the connection's path did (the audit's `path` events).
    func recordPath(_ event: TrafficEvent.PathEvent) {
        sink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .path(event)))
    }

    /// Wires the relays and starts reading both legs. Call on the event loop. An `adopted`
    /// connection was opened (and counted) by an epoll relay; its pending bytes go first.
    func start(
        baseline: LinkProfile?,
        shaping: [ShapingKey: FaultEffect],
        adopted: Adoption? = nil,
        path: ConnectionPath? = nil
    ) {
        eventLoop.preconditionInEventLoop()
        let client = legs[.client]!
        let server = legs[.server]!
        self.path = path
        // Not from inside the shaper that saw it die: on the loop's next turn.
        path?.onDeath = { [weak self] in
            guard let self else { return }
            eventLoop.execute { self.applyShaping() }
        }
        if let path {
            // The client leg's shaper carries what goes down to the client; the server leg's, what goes up.
            client.shaper.join(path, direction: .downstream)
            server.shaper.join(path, direction: .upstream)
            if let sink = trafficSink {
                let id = self.id
                let clock = self.clock
                path.onEvent = { _, event in sink.record(TrafficEvent(time: clock.now(), connection: id, kind: .path(event))) }
            }
        }
        client.relay.partner = server.relay
        server.relay.partner = client.relay
        client.relay.connection = self
        server.relay.connection = self
        for side in Side.allCases {
            // What a leg's shaper holds is its pending bytes: its FIN waits behind them.
            legs[side]!.shaper.onHoldingChanged = { [weak self] holding in
                guard let self else { return }
                perform(machine.pendingChanged(side, hasPending: holding))
            }
        }
        if let sink = trafficSink {
            let id = self.id
            let clock = self.clock
            for side in Side.allCases {
                let map = recordMaps[side.slot]
                legs[side]!.shaper.onDelivered = { [weak self] buffer in
                    sink.record(TrafficEvent(time: clock.now(), connection: id, kind: .written(side, Array(buffer.readableBytesView))))
                    if map == nil { self?.wrote(buffer.readableBytes, to: side) }
                }
                // A TLS leg's tracker counts wire bytes, from the handshake on.
                if let map {
                    acknowledgements[side.slot].wrote(Int(map.wire))
                    map.onWire = { [weak self] count in self?.wrote(count, to: side) }
                    map.onClosing = { [weak self] in self?.pollAcknowledgements(side) }
                }
            }
        }
        if let adopted {
            machine = RelayStateMachine(connected: true, recorded: adopted.closeRecorded)
            acknowledgements = adopted.acknowledgements
        } else {
            sink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .opened(endpoints)))
            counters.connectionOpened()
        }
        for side in Side.allCases { _ = machine.acceptsChanged(side, accepts: legs[side]!.relay.canAccept) }
        self.baseline = baseline
        self.shaping = shaping
        reshape()
        for (key, effect) in shaping.sorted(by: { $0.key < $1.key }) { perform(machine.faultAdded(effect, key: key)) }
        if let adopted {
            for (side, bytes) in [(Side.client, adopted.toClient), (.server, adopted.toServer)] where !bytes.isEmpty {
                legs[side]!.relay.deliver(ByteBuffer(bytes: bytes))
                legs[side]!.channel.flush()
            }
        }
        for side in Side.allCases { legs[side]!.relay.drainEarlyArrivals() }
        for side in Side.allCases where !machine.leg(side).closed { legs[side]!.relay.startReading() }
    }

    // MARK: shaping

    /// Adds (or replaces) the fault named `key`: its shaping, and its rules on bytes read or on a timer.
    func addShaping(_ effect: FaultEffect, key: ShapingKey) {
        eventLoop.preconditionInEventLoop()
        guard !machine.isCut else { return }
        shaping[key] = effect
        reshape()
        perform(machine.faultAdded(effect, key: key))
    }

    /// Removes the fault named `key`.
    func removeShaping(key: ShapingKey) {
        eventLoop.preconditionInEventLoop()
        perform(machine.faultRemoved(key))
        guard shaping.removeValue(forKey: key) != nil else { return }
        reshape()
    }

    /// Lifts the shaping named `key`, even on a cut connection (a timeout's hold must not keep the FIN of the cut).
    func liftShaping(key: ShapingKey) {
        guard shaping.removeValue(forKey: key) != nil else { return }
        applyShaping()
    }

    private func reshape() {
        guard !machine.isCut else { return }
        applyShaping()
    }

    func applyShaping() {
        let effects = shapingEffects()
        var dead: Set<Direction> = path?.isDead == true ? Set(Direction.allCases) : []
        var lossy: [Direction: LossModel] = [:]
        for direction in Direction.allCases {
            var settings = ShapingSettings.combining(effects, direction: direction)
            // On the kernel path, loss is real: the segments are dropped there, not delayed here.
            if let model = settings.loss, !deadPathLifted, takesKernelLoss {
                lossy[direction] = model
                settings.loss = nil
            }
            legs[direction.consumer]!.shaper.apply(settings)
            if settings.deadPath { dead.insert(direction) }
        }
        setKernelLoss(lossy)
        setDeadPath(deadPathLifted ? [] : dead)
    }

    /// The link profile first, then the faults in the order they began (but `excluded`).
    private func shapingEffects(excluding excluded: ShapingKey? = nil) -> [FaultEffect] {
        (baseline.map { [FaultEffect.link($0)] } ?? []) + shaping.filter { $0.key != excluded }.sorted { $0.key < $1.key }.map(\.value)
    }

    /// The fault named `key` is about to end: the ways it alone made dead come back to life now, before it releases
    /// what it held (``removeShaping(key:)``), so that those bytes do not meet the kernel's drops on their way out (the
    /// proxy's ``ProxyServer/removeShaping(key:)`` waits for the rules to go in between). Returns whether it changed any.
    func reviveDeadPath(endingFault key: ShapingKey) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard !deadDirections.isEmpty, !deadPathLifted, shaping[key] != nil else { return false }
        let effects = shapingEffects(excluding: key)
        var stillDead: Set<Direction> = path?.isDead == true ? Set(Direction.allCases) : []
        for direction in Direction.allCases where ShapingSettings.combining(effects, direction: direction).deadPath {
            stillDead.insert(direction)
        }
        let remaining = deadDirections.intersection(stillDead)
        guard remaining != deadDirections else { return false }
        setDeadPath(remaining)
        return true
    }

    // MARK: faults that cut

    /// A fault cuts the connection as `mode` says; returns whether it was live to cut.
    func cut(_ mode: DisconnectMode, linger: ChaosDuration) -> Bool {
        eventLoop.preconditionInEventLoop()
        if mode == .truncate { truncating = true }
        let actions = machine.cut(mode, linger: linger)
        perform(actions)
        return !actions.isEmpty
    }

    /// Ends whatever is still open with RST (the proxy is stopping), whether or not a fault cut it.
    func terminate() {
        eventLoop.preconditionInEventLoop()
        resetDrain.terminating = true
        finishResetDrain()
        perform(machine.terminate())
    }

    // MARK: relay callbacks

    /// Bytes read from `side`; returns false when they must be dropped (the leg is being cut, a reset_peer
    /// fault swallows them). A limit_data fault may shorten `buffer`.
    func didRead(_ buffer: inout ByteBuffer, from side: Side) -> Bool {
        if machine.leg(side).discardsReads {
            if resetDrain.draining.contains(side) { drainRead(buffer.readableBytes) }
            if machine.recordsDroppedReads(side) || resetDrain.draining.contains(side) {
                trafficSink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .read(side, Array(buffer.readableBytesView))))
            }
            return false
        }
        if !machine.byteFaults.isEmpty, !applyByteFaults(&buffer, from: side) { return false }
        counters.add(bytes: buffer.readableBytes, producedBy: side == .client)
        // What the peer writes comes after what it read: the acknowledgement of that reached the proxy's socket with
        // these bytes or before them, and is recorded first (a polled acknowledgement recorded after a consumer's close
        // frame made the message it read before closing "taken after close": a naive WebSocket run, s68).
        pollAcknowledgements(side)
        trafficSink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .read(side, Array(buffer.readableBytesView))))
        return true
    }

    /// `side` sent FIN: the machine passes the half-close on once the partner's shaper holds no
    /// bytes (the FIN is still due its latency after now).
    func didReceiveEOF(from side: Side) {
        pollAcknowledgements(side)
        legs[side.other]!.shaper.finReadAt = Int64(truncatingIfNeeded: eventLoop.now.uptimeNanoseconds)
        perform(machine.receivedFIN(side))
    }

    /// Whether `side` may be read now (the machine's backpressure rule).
    func mayRead(_ side: Side) -> Bool { machine.mayRead(side) || resetDrain.draining.contains(side) }

    /// Whether `side` takes more bytes (its channel's writability, its shaper's pressure) changed.
    func acceptanceChanged(_ side: Side) {
        perform(machine.acceptsChanged(side, accepts: legs[side]!.relay.canAccept))
    }

    /// A leg failed: a reset from its peer is passed on as a reset to the other leg.
    func legFailed(_ side: Side, error: any Error) {
        // A peer answering a cut of chaos's (a truncate, a reset) with an EOF is the fault's doing, not a TLS failure of the pair's.
        let unclean = (error as? NIOSSLError) == .uncleanShutdown
        // A peer that sent close_notify and then closed its socket without waiting for ours closed in order (TLS lets
        // each side close its write side on its own); NIO's handler calls that EOF unclean. Its closure follows.
        if unclean, recordMaps[side.slot]?.endedAfterCloseNotify == true {
            pollAcknowledgements(side)
            return
        }
        let ownTruncate = (truncating || machine.isCut) && unclean
        // A socket that ended with no FIN from its peer was reset (a peer whose socket closed with bytes unread answers
        // the next ones with a RST): NIO closes it without an error event, and the TLS handler calls it unclean.
        let resetUnderTLS = unclean && recordMaps[side.slot]?.receivedTCPFIN == false
        if recordMaps[side.slot] != nil, !ownTruncate, !resetUnderTLS, error is NIOSSLError || error is BoringSSLError {
            onTLSFailure?(side, error)
        }
        let reset = resetUnderTLS || ((error as? IOError).map { $0.errnoCode == ECONNRESET || $0.errnoCode == EPIPE } ?? false)
        pollAcknowledgements(side)
        perform(machine.failed(side, reset: reset))
    }

    /// A leg's channel closed. Without an error first, its peer closed in order (NIO folds the
    /// EOF into the closure when our side had already sent FIN): the machine passes that on.
    func legInactive(_ side: Side) {
        perform(machine.closed(side))
    }

    /// Performs the machine's actions on the channels, in order.
    func perform(_ actions: [RelayStateMachine.Action]) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .recordClose(let side, let kind, let beforeReset):
                if beforeReset, kind == .resetByFault, readsBeforeReset(side) { return drainBeforeReset(then: Array(actions[index...])) }
                deadPathLegClosed(side, kind, byProxy: beforeReset)
                pollAcknowledgements(side, beforeReset: beforeReset)
                if kind == .reset, !beforeReset { recordAcknowledgementsCutByPeerReset(side) }
                sink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .closed(side, kind)))
            case .sendFIN(let side):
                if truncating, let map = recordMaps[side.slot] {
                    map.shutdownBelowTLS(all: false)
                    break
                }
                legs[side]!.relay.shutdownOutput()  // behind the bytes, and any slow_close, in the shaper
            case .discard(let side):
                legs[side]!.shaper.discardHeld()
                legs[side]!.relay.startReading()  // read to drop, so that its peer's FIN or reset is seen
            case .reset(let side):
                legs[side]!.shaper.discardHeld()
                if let map = recordMaps[side.slot] { map.resetBelowTLS(legs[side]!.channel) } else { legs[side]!.channel.closeWithReset() }
            case .close(let side):
                if truncating, let map = recordMaps[side.slot] {
                    map.shutdownBelowTLS(all: true)
                    break
                }
                legs[side]!.channel.close(promise: nil)
            case .closeInOrder:
                break  // the last FIN closed its channel (NIO closes a channel shut both ways), the other one already was
            case .awaitAcknowledgements(let side):
                awaitAcknowledgements(side)
            case .resumeReading(let side):
                legs[side]!.relay.startReading()
            case .countCut:
                counters.connectionCut()
                onCut(id)
            case .scheduleLinger(let delay):
                lingerTask?.cancel()
                lingerTask = eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) { [self] in
                    perform(machine.lingerExpired())
                }
            case .cancelLinger:
                lingerTask?.cancel()
                lingerTask = nil
            case .recordUpstreamFailure:
                break  // a wired connection had its upstream
            case .finish:
                lingerTask?.cancel()
                protocolFrames?.grace?.cancel()
                cancelFaultTimers()
                stopAcknowledgementPolls()
                setKernelLoss([:])
                setDeadPath([])
                onFinished(id)
            }
        }
    }
}

extension Channel {
    /// Closes with RST rather than FIN (SO_LINGER 0), as a cut connection or a passed-on reset must.
    /// `isActive` is not asked first: it can read false for an open socket (seen when a cut follows
    /// a read that NIO had queued), and the close would then go out as a FIN.
    func closeWithReset() {
        guard let provider = self as? any SocketOptionProvider else {
            close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in self.close(promise: nil) }
    }
}
