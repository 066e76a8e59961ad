import ChaosCore
import NIOCore

/// The faults that act on bytes read or after a time (limit_data, reset_peer, timeout): the
/// ``RelayStateMachine``'s rules (`RelayStateMachine+Faults.swift`) decide, this performs, with timers on the
/// connection's event loop (an `EmbeddedEventLoop` in tests: virtual time).
extension ProxiedConnection {
    /// Lets the byte faults see `buffer`, read from `side`: shortens it to what may pass. Returns false when
    /// nothing may.
    func applyByteFaults(_ buffer: inout ByteBuffer, from side: Side) -> Bool {
        let verdict = machine.read(buffer.readableBytes, from: side)
        perform(verdict.actions)
        if verdict.allowed < buffer.readableBytes {
            buffer = buffer.getSlice(at: buffer.readerIndex, length: verdict.allowed)!
        }
        if verdict.closeAfter {
            // After what passed is handed on (this read's bytes go first).
            eventLoop.execute { [self] in perform(machine.cut(.close, linger: RelayStateMachine.faultLinger)) }
        }
        return verdict.allowed > 0
    }

    /// Performs what the byte faults' rules return, in order.
    func perform(_ actions: [RelayStateMachine.FaultAction]) {
        for action in actions {
            switch action {
            case .scheduleTimer(let key, let delay):
                faultTimers[key]?.cancel()
                faultTimers[key] = eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) { [self] in
                    faultTimers[key] = nil
                    perform(machine.faultTimerExpired(key))
                }
            case .cancelTimer(let key):
                faultTimers.removeValue(forKey: key)?.cancel()
            case .endTimeout(let key):
                for leg in legs.values { leg.shaper.discardHeld() }
                liftShaping(key: key)
            case .relay(let relayActions):
                perform(relayActions)
            }
        }
    }

    /// Forgets every fault timer (the connection is over).
    func cancelFaultTimers() {
        for timer in faultTimers.values { timer.cancel() }
        faultTimers = [:]
    }
}
