import ChaosCore
import ChaosProtocols
import NIOCore

/// The frames of both directions of a connection whose protocol the proxy follows (through its plug-in), and the
/// frames of its own waiting for a boundary.
struct ProtocolFrames {
    /// The protocol followed.
    let plugin: any ProtocolPlugin.Type
    /// By the producing side's ``Side/slot``: client to server, then server to client.
    var trackers: [any FrameBoundaryTracking]
    /// Per direction: a frame to put in at the next boundary, and whether nothing more passes that way after it.
    var pending: [FaultFrames.Insert?] = [nil, nil]
    /// Per direction: nothing more passes (a close frame went that way, or the connection is closing).
    var silenced = [false, false]
    /// The grace time's end, after which the connection is closed.
    var grace: Scheduled<Void>?
    /// The lasting faults lying in wait on this connection (``ProxyServer/beginWaitingFault(_:key:)``).
    var waiting: [ShapingKey: ProtocolFault] = [:]

    init(plugin: any ProtocolPlugin.Type) {
        self.plugin = plugin
        trackers = [plugin.boundaryTracker(producer: .client), plugin.boundaryTracker(producer: .server)]
    }
}

extension ProxiedConnection {
    /// Hands bytes read from `side` to the other leg, following their frames when the proxy does, putting a
    /// pending frame of its own in at the first boundary, and dropping what a close silenced. After the client's bytes,
    /// a lasting fault lying in wait catches the connection when its plug-in says so.
    func forward(_ buffer: ByteBuffer, from side: Side) {
        let consumer = legs[side.other]!.relay
        guard protocolFrames != nil else { return consumer.deliver(buffer) }
        defer { if side == .client, !(protocolFrames?.waiting.isEmpty ?? true) { catchWaiting() } }
        let slot = side.slot
        var rest = buffer
        // An answer waiting for the client's next request follows the requests it silenced.
        defer { if side == .client { putInAnswerIfDue() } }
        if protocolFrames!.silenced[slot] {
            if side == .client, protocolFrames!.pending[Side.server.slot]?.answersARequest == true {
                rest.withUnsafeReadableBytes { _ = protocolFrames!.trackers[slot].advance($0, stopAtBoundary: false) }
            }
            return
        }
        if let pending = protocolFrames!.pending[slot] {
            let consumed = rest.withUnsafeReadableBytes { protocolFrames!.trackers[slot].advance($0, stopAtBoundary: true) }
            if consumed > 0 { consumer.deliver(rest.readSlice(length: consumed)!) }
            guard protocolFrames!.trackers[slot].atBoundary else { return }
            if isDue(pending) {
                putIn(pending, from: side)
                if pending.silenceAfter || rest.readableBytes == 0 { return }
            }
        }
        rest.withUnsafeReadableBytes { _ = protocolFrames!.trackers[slot].advance($0, stopAtBoundary: false) }
        consumer.deliver(rest)
    }

    /// Whether `pending` may go in now: an answer only while a request awaits one (``FaultFrames/Insert/answersARequest``).
    private func isDue(_ pending: FaultFrames.Insert) -> Bool {
        guard pending.answersARequest, let frames = protocolFrames else { return true }
        return frames.plugin.awaitsAnswer(client: frames.trackers[Side.client.slot], server: frames.trackers[Side.server.slot])
    }

    /// Puts in the answer pending toward the client once a request of the client's awaits it and the server's
    /// bytes are at a boundary.
    private func putInAnswerIfDue() {
        let slot = Side.server.slot
        guard let pending = protocolFrames?.pending[slot], pending.answersARequest, protocolFrames!.trackers[slot].atBoundary, isDue(pending)
        else { return }
        putIn(pending, from: .server)
    }

    /// Puts `pending` into the direction `producer` writes, now.
    private func putIn(_ pending: FaultFrames.Insert, from producer: Side) {
        let slot = producer.slot
        protocolFrames!.pending[slot] = nil
        if pending.silenceAfter { protocolFrames!.silenced[slot] = true }
        guard !pending.frame.isEmpty else { return }
        let leg = legs[producer.other]!
        leg.relay.deliver(ByteBuffer(bytes: pending.frame))
        leg.channel.flush()
    }

    /// A lasting fault lies in wait on this connection (when its frames are followed); returns whether it does.
    func wait(_ fault: ProtocolFault, key: ShapingKey) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard protocolFrames != nil, !machine.isCut, protocolFrames!.grace == nil else { return false }
        protocolFrames!.waiting[key] = fault
        return true
    }

    /// A lasting fault no longer lies in wait on this connection.
    func stopWaiting(key: ShapingKey) {
        eventLoop.preconditionInEventLoop()
        protocolFrames?.waiting.removeValue(forKey: key)
    }

    /// Whether a fault lying in wait catches the connection now (its plug-in says what it waits for): the first that
    /// does puts its frames in, and nothing waits on the connection after it.
    private func catchWaiting() {
        guard let frames = protocolFrames else { return }
        let client = frames.trackers[Side.client.slot]
        let server = frames.trackers[Side.server.slot]
        for (key, fault) in frames.waiting.sorted(by: { $0.key < $1.key }) where frames.plugin.catches(fault, client: client, server: server) {
            protocolFrames!.waiting = [:]
            if protocolClose(fault) { onCaught?(key) }
            return
        }
    }

    /// The protocol followed and the tracker of the client's bytes, when `fault` would strike this connection now
    /// (``protocolClose(_:)``).
    func strikable(by fault: ProtocolFault) -> (any ProtocolPlugin.Type, any FrameBoundaryTracking)? {
        guard faultFramesIfLive(fault) != nil, let frames = protocolFrames else { return nil }
        return (frames.plugin, frames.trackers[Side.client.slot])
    }

    /// The frames `fault` puts in on this connection, when it is live, its frames followed and no fault's grace runs.
    private func faultFramesIfLive(_ fault: ProtocolFault) -> FaultFrames? {
        eventLoop.preconditionInEventLoop()
        guard let frames = protocolFrames, !machine.isCut, frames.grace == nil else { return nil }
        return frames.plugin.faultFrames(fault, connection: id, client: frames.trackers[Side.client.slot])
    }

    /// A protocol's own fault (`ws-close`, `goaway`): its frames go in at the next boundary of each direction it names, and
    /// the connection is closed (FIN both ways) after its grace time. Returns whether the connection was live
    /// and its frames followed.
    func protocolClose(_ fault: ProtocolFault) -> Bool {
        guard let frames = faultFramesIfLive(fault) else { return false }
        let grace = frames.grace
        protocolFrames!.pending = frames.inserts
        for producer in Side.allCases {
            if let pending = protocolFrames!.pending[producer.slot], protocolFrames!.trackers[producer.slot].atBoundary, isDue(pending) {
                putIn(pending, from: producer)
            }
        }
        // The fault ends the connection: it is counted as cut now, and no later fault picks it.
        counters.connectionCut()
        onCut(id)
        protocolFrames!.grace = eventLoop.scheduleTask(in: .nanoseconds(grace.nanoseconds)) { [self] in
            perform(machine.cut(.close, linger: .zero).filter { if case .countCut = $0 { false } else { true } })
        }
        return true
    }
}
