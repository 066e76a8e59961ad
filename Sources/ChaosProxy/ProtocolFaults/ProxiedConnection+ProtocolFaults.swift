import ChaosCore
import NIOCore

/// The frames of both directions of a connection whose protocol the proxy follows, and the frames of its own
/// waiting for a boundary.
struct ProtocolFrames {
    /// By the producing side's ``Side/slot``: client to server, then server to client.
    var trackers: [FrameBoundaryTracker]
    /// Per direction: a frame to put in at the next boundary, and whether nothing more passes that way after it.
    var pending: [(frame: [UInt8], silenceAfter: Bool)?] = [nil, nil]
    /// Per direction: nothing more passes (a close frame went that way, or the connection is closing).
    var silenced = [false, false]
    /// The grace time's end, after which the connection is closed.
    var grace: Scheduled<Void>?

    init(framing: FrameProtocol) {
        trackers = [FrameBoundaryTracker(framing: framing, producer: .client),
                    FrameBoundaryTracker(framing: framing, producer: .server)]
    }
}

extension ProxiedConnection {
    /// Hands bytes read from `side` to the other leg, following their frames when the proxy does, putting a
    /// pending frame of its own in at the first boundary, and dropping what a close silenced.
    func forward(_ buffer: ByteBuffer, from side: Side) {
        let consumer = legs[side.other]!.relay
        guard protocolFrames != nil else { return consumer.deliver(buffer) }
        let slot = side.slot
        var rest = buffer
        if protocolFrames!.silenced[slot] { return }
        if let pending = protocolFrames!.pending[slot] {
            let consumed = rest.withUnsafeReadableBytes { protocolFrames!.trackers[slot].advance($0, stopAtBoundary: true) }
            if consumed > 0 { consumer.deliver(rest.readSlice(length: consumed)!) }
            guard protocolFrames!.trackers[slot].atBoundary else { return }
            putIn(pending, from: side)
            if pending.silenceAfter || rest.readableBytes == 0 { return }
        }
        rest.withUnsafeReadableBytes { _ = protocolFrames!.trackers[slot].advance($0, stopAtBoundary: false) }
        consumer.deliver(rest)
    }

    /// Puts `pending` into the direction `producer` writes, now.
    private func putIn(_ pending: (frame: [UInt8], silenceAfter: Bool), from producer: Side) {
        let slot = producer.slot
        protocolFrames!.pending[slot] = nil
        if pending.silenceAfter { protocolFrames!.silenced[slot] = true }
        guard !pending.frame.isEmpty else { return }
        let leg = legs[producer.other]!
        leg.relay.deliver(ByteBuffer(bytes: pending.frame))
        leg.channel.flush()
    }

    /// A `ws-close` or `goaway` fault: its frames go in at the next boundary of each direction it names, and
    /// the connection is closed (FIN both ways) after its grace time. Returns whether the connection was live
    /// and its frames followed.
    func protocolClose(_ effect: FaultEffect) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard protocolFrames != nil, !machine.isCut, protocolFrames!.grace == nil else { return false }
        let grace: ChaosDuration
        switch effect {
        case .wsClose(let code, let side, let wait):
            grace = wait
            let toClient = side != .server, toServer = side != .client
            // Toward a side that gets no close, nothing more passes once a frame ends: the proxy is closing.
            protocolFrames!.pending[Side.server.slot] = (toClient ? ProtocolFrame.webSocketClose(code: code, masked: false) : [], true)
            protocolFrames!.pending[Side.client.slot] = (toServer ? ProtocolFrame.webSocketClose(code: code, masked: true, key: UInt32(truncatingIfNeeded: id))
                                                          : [], true)
        case .goaway(let wait):
            grace = wait
            let last = protocolFrames!.trackers[Side.client.slot].highestStream
            protocolFrames!.pending[Side.server.slot] = (ProtocolFrame.goaway(lastStream: last), false)
        default:
            return false
        }
        for producer in Side.allCases {
            if let pending = protocolFrames!.pending[producer.slot], protocolFrames!.trackers[producer.slot].atBoundary {
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

/// The frames a protocol fault sends.
enum ProtocolFrame {
    /// A WebSocket close frame with `code` and a reason naming chaos; `masked` (with `key`) as a client's must be.
    static func webSocketClose(code: Int, masked: Bool, key: UInt32 = 0x6368_616f) -> [UInt8] {
        let payload = [UInt8(code >> 8 & 0xff), UInt8(code & 0xff)] + Array("chaos ws-close".utf8)
        guard masked else { return [0x88, UInt8(payload.count)] + payload }
        let mask = [UInt8(key >> 24), UInt8(key >> 16 & 0xff), UInt8(key >> 8 & 0xff), UInt8(key & 0xff)]
        return [0x88, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    /// An HTTP/2 GOAWAY (NO_ERROR) naming `lastStream` as the last stream processed.
    static func goaway(lastStream: UInt32) -> [UInt8] {
        let last = lastStream & 0x7fff_ffff
        return [0, 0, 8, 7, 0, 0, 0, 0, 0] + [UInt8(last >> 24), UInt8(last >> 16 & 0xff), UInt8(last >> 8 & 0xff), UInt8(last & 0xff)]
            + [0, 0, 0, 0]
    }
}
