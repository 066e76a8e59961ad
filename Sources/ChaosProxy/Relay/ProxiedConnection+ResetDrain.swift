import ChaosCore
import NIOCore

/// What a leg's socket still holds when the proxy resets it.
///
/// The leg's peer wrote those bytes and the proxy's kernel acknowledged them: a capture of the leg shows them sent, and
/// the reset drops them. Unread, the live audit never counted them sent, so a message a fault's reset cut there, which
/// a buggy producer then skipped on resume, was lost on the wire and nowhere in the live audit (a fresh-clone run, s67:
/// a server's seq 294 written 12 ms before a `disconnect`, tcpdump's audit lost 2, the live audit 1). Before a fault's
/// reset (its cut, its linger's end, a reset passed on in a cut connection; not a peer's reset passed on outside a
/// fault, which the pair's own stop makes, nor the proxy's stop), the legs about to be reset are read to drop,
/// their reads recorded, until a turn reads nothing (at most ``ResetDrain/turns`` turns of ``ResetDrain/turn``); then
/// their closes are recorded and the resets go out. The epoll relay reads its sockets in place instead.
struct ResetDrain {
    /// The longest a reset waits for its legs' reads: 64 turns, each reading up to NIO's reads per wake-up.
    static let turns = 64
    /// One turn: long enough for the event loop to handle the sockets' readiness before the check.
    static let turn = TimeAmount.milliseconds(1)

    /// The legs being read before their reset.
    var draining: Set<Side> = []
    /// Legs already read before a reset: their recorded closes and resets go on.
    var drained: Set<Side> = []
    /// Bytes read from the draining legs in the current turn.
    var readThisTurn = 0
    /// The actions waiting for the reads (from the first close the reset records).
    var waiting: [RelayStateMachine.Action] = []
    var task: Scheduled<Void>?
    /// The proxy is stopping: resets go out at once.
    var terminating = false
}

extension ProxiedConnection {
    /// Whether `side` is read before the proxy resets it: only when its bytes are recorded, its channel is open and it
    /// was not read already.
    func readsBeforeReset(_ side: Side) -> Bool {
        guard trafficSink != nil, !resetDrain.terminating, !resetDrain.drained.contains(side) else { return false }
        return legs[side]?.channel.isActive == true
    }

    /// Reads every leg that `actions` reset (their closes recorded before the reset) until they are dry, then performs
    /// `actions`.
    func drainBeforeReset(then actions: [RelayStateMachine.Action]) {
        let sides = actions.compactMap { action -> Side? in
            guard case .recordClose(let side, .resetByFault, beforeReset: true) = action, readsBeforeReset(side) else { return nil }
            return side
        }
        resetDrain.draining.formUnion(sides)
        resetDrain.drained.formUnion(sides)
        resetDrain.waiting += actions
        resetDrain.readThisTurn = 0
        for side in sides { legs[side]!.relay.startReading() }
        scheduleDrainTurn(1)
    }

    /// Counts what a draining leg read (its bytes were recorded as dropped reads).
    func drainRead(_ count: Int) { resetDrain.readThisTurn += count }

    /// A turn goes on while it read something or a leg's socket still holds bytes: on a loaded machine a turn's timer
    /// can fire before the event loop handled the socket's readiness, and a turn that read nothing then ended the reads
    /// with bytes still held (a fresh-clone run, s69d: 4,112,896 bytes recorded of 4,208,128 acknowledged).
    private func scheduleDrainTurn(_ turn: Int) {
        resetDrain.task = eventLoop.scheduleTask(in: ResetDrain.turn) { [self] in
            let readSome = resetDrain.readThisTurn > 0
            resetDrain.readThisTurn = 0
            let open = resetDrain.draining.filter { legs[$0]?.channel.isActive == true }
            let holding = open.filter { legs[$0]!.channel.receiveQueueHolds() ?? false }
            guard readSome || !holding.isEmpty, !open.isEmpty, turn < ResetDrain.turns else { return finishResetDrain() }
            for side in holding { legs[side]!.relay.startReading() }
            scheduleDrainTurn(turn + 1)
        }
    }

    /// Ends the reads before a reset: the closes are recorded and the resets go out.
    func finishResetDrain() {
        resetDrain.task?.cancel()
        resetDrain.task = nil
        resetDrain.draining = []
        let waiting = resetDrain.waiting
        resetDrain.waiting = []
        if !waiting.isEmpty { perform(waiting) }
    }
}
