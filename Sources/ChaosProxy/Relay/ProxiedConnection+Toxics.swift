import ChaosCore
import NIOCore

/// Toxiproxy's toxics on one connection: shaping ones go to the shapers like any fault; the others
/// (timeout, reset_peer, limit_data, slow_close, a slicer's size variation) act here, with timers on the connection's event loop.
extension ProxiedConnection {
    /// One toxic on this connection.
    struct ActiveToxic {
        var effect: ToxicEffect
        /// Its timer (timeout, reset_peer), while pending.
        var timer: Scheduled<Void>?
        /// Bytes passed its way since it arrived (limit_data).
        var passed: Int64 = 0
    }

    /// Adds the toxic named `key` (again: nothing changes). Call on the event loop.
    func addToxic(_ effect: ToxicEffect, key: ShapingKey) {
        eventLoop.preconditionInEventLoop()
        guard toxics[key] == nil, !machine.isCut else { return }
        var toxic = ActiveToxic(effect: effect)
        switch effect {
        case .none, .limitData, .slowClose, .resetPeer: break // they act as bytes pass (`applyToxics`, `sendFIN`)
        case .shaping(let shaping): addShaping(shaping, key: key)
        case .slicer(let size, _, let delay, let direction):
            toxics[key] = toxic // before the shaping, which reads the variation from it
            addShaping(.slice(maxBytes: size, delay: DurationRange(delay, delay), direction: direction == .upstream ? .upstream : .downstream),
                       key: key)
        case .timeout(let after, let direction):
            addShaping(.stall(direction: direction == .upstream ? .upstream : .downstream), key: key)
            // Then closed: what the stall held is dropped (as Toxiproxy drops it) and the stall lifted, so that
            // the FIN is not held behind it.
            if let after {
                toxic.timer = schedule(after) { connection in
                    for leg in connection.legs.values { leg.shaper.discardHeld() }
                    connection.removeShaping(key: key)
                    connection.cut(.close)
                }
            }
        }
        toxics[key] = toxic
    }

    /// Removes the toxic named `key`. Call on the event loop.
    func removeToxic(key: ShapingKey) {
        eventLoop.preconditionInEventLoop()
        guard let toxic = toxics.removeValue(forKey: key) else { return }
        toxic.timer?.cancel()
        removeShaping(key: key)
    }

    /// Cuts the connection as a toxic does; a no-op once cut or finished.
    private func cut(_ mode: DisconnectMode) {
        _ = cut(mode, linger: .seconds(Int64(5)))
    }

    private func schedule(_ delay: ChaosDuration, _ body: @escaping @Sendable (ProxiedConnection) -> Void) -> Scheduled<Void> {
        eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) { [self] in body(self) }
    }

    /// Applies the toxics that act on bytes read travelling `direction`. limit_data cuts `buffer` to what may
    /// still pass and, once its limit is reached, closes both legs (after what passed is written). reset_peer, as
    /// Toxiproxy's, swallows the first bytes that reach it and everything after, and resets both legs `after` that
    /// first read. Returns false when nothing may pass.
    func applyToxics(_ buffer: inout ByteBuffer, direction: Direction) -> Bool {
        var allowed = Int64(buffer.readableBytes), reached = false
        for (key, toxic) in toxics {
            switch toxic.effect {
            case .limitData(let bytes, let way) where way == direction:
                let remaining = max(0, bytes - toxic.passed)
                allowed = min(allowed, remaining)
                if remaining <= Int64(buffer.readableBytes) { reached = true }
                toxics[key]!.passed += min(remaining, Int64(buffer.readableBytes))
            case .resetPeer(let after, let way) where way == direction:
                allowed = 0
                if toxic.timer == nil { toxics[key]!.timer = schedule(after) { $0.cut(.reset) } }
            default:
                continue
            }
        }
        if allowed < buffer.readableBytes { buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(allowed))! }
        if reached { eventLoop.execute { [self] in cut(.close) } }
        return allowed > 0
    }

    /// The size variation of the slicer toxic that slices `direction` (the first, as the first slice applies).
    func sliceVariation(_ direction: Direction) -> Int {
        let slicers = toxics.sorted { $0.key < $1.key }.compactMap { _, toxic -> Int? in
            guard case .slicer(_, let variation, _, let way) = toxic.effect, way == direction else { return nil }
            return variation
        }
        return slicers.first ?? 0
    }

    /// How long a FIN sent to `side` waits (the longest slow_close toxic on the way it travels).
    func closeDelay(toward side: Side) -> ChaosDuration? {
        let delays = toxics.values.compactMap { toxic -> ChaosDuration? in
            guard case .slowClose(let delay, let direction) = toxic.effect, direction.consumer == side else { return nil }
            return delay
        }
        return delays.max(by: { $0.nanoseconds < $1.nanoseconds })
    }

    /// Sends a FIN to `side`, after any slow_close delay.
    func sendFIN(to side: Side) {
        guard let delay = closeDelay(toward: side), delay.nanoseconds > 0 else {
            legs[side]!.relay.shutdownOutput()
            return
        }
        _ = schedule(delay) { $0.legs[side]!.relay.shutdownOutput() }
    }
}
