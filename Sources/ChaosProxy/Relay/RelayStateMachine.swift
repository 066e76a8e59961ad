import ChaosCore

/// The rules of one proxied connection, without sockets: both relays (the NIO relay,
/// ``ProxiedConnection``, and the epoll relay, ``EpollRelayConnection``) feed it what happened
/// and perform the actions it returns, in order.
///
/// The rules it owns:
/// - a leg is read only while its partner takes the bytes, or while its bytes go nowhere (a cut
///   leg is read and dropped, so that its peer's FIN or reset is still seen): backpressure;
/// - a FIN is passed on to the partner once the bytes read before it were written there;
/// - a leg whose peer already sent FIN gets ours (its last act) only once its peer acknowledged
///   what was written to it, or ``acknowledgementWait`` passed (the orderly close);
/// - a reset (or an error) on one leg is passed on as a reset of the other, unless that leg had
///   already finished both ways (then it is closed);
/// - each leg's close is recorded once, with how it ended, but for a peer's reset after a FIN cut or after its own FIN,
///   and the proxy's reset after a peer's FIN (both ends of such a leg are on the wire);
/// - an upstream that does not answer, or not in time, resets the client;
/// - what a fault's cut does in each ``DisconnectMode``;
/// - what the faults that count bytes or run a timer do (limit_data, reset_peer, timeout: ``faultAdded(_:key:)``);
/// - the connection is finished when both legs are closed.
struct RelayStateMachine: Sendable {
    /// Where the connection is in its life.
    enum Phase: Sendable, Equatable {
        /// Dialling the upstream.
        case connecting
        /// Both legs up; bytes pass unless ``isCut``.
        case relaying
        /// Both legs closed.
        case finished
    }

    /// What a relay must do, in the order given.
    enum Action: Sendable, Equatable {
        /// Record that `side` closed, and how (the relay reads the leg's acknowledgements first; with
        /// `beforeReset`, as a leg about to be reset).
        case recordClose(Side, TrafficEvent.CloseKind, beforeReset: Bool)
        /// Send FIN on `side` (its pending bytes are all written).
        case sendFIN(Side)
        /// `side`'s peer sent FIN and ours is due: read what it acknowledged until nothing written to it
        /// is outstanding or ``RelayStateMachine/acknowledgementWait`` passed, then tell the machine
        /// ``acknowledgementsSettled(_:)``.
        case awaitAcknowledgements(Side)
        /// `side` may be read again (it was held back because its partner took no more).
        case resumeReading(Side)
        /// Drop what is held for `side` and, from now on, read `side` only to drop it.
        case discard(Side)
        /// Close `side` with RST.
        case reset(Side)
        /// Close `side`'s socket in order.
        case close(Side)
        /// Both legs ended in order (each sent and received FIN, the peers acknowledged the last
        /// bytes): close both sockets. It follows the last ``sendFIN(_:)``, which the close may carry.
        case closeInOrder
        /// Count the connection as cut by a fault.
        case countCut
        /// After `delay`, tell the machine ``lingerExpired()``.
        case scheduleLinger(ChaosDuration)
        /// Forget a scheduled linger.
        case cancelLinger
        /// The upstream never answered: count it and record the refusal.
        case recordUpstreamFailure
        /// The connection is over: forget it.
        case finish
    }

    /// One leg, named by the end of the connection it faces.
    struct Leg: Sendable, Equatable {
        /// Its peer sent FIN (a read returned 0).
        var receivedFIN = false
        /// Our FIN went out on it.
        var sentFIN = false
        /// Bytes read from its partner are waiting to be written to it (its FIN waits behind them).
        var hasPending = false
        /// It takes more bytes now (its socket, and the shaper in front of it, are not full).
        var accepts = true
        /// Our FIN is due but waits for its peer's acknowledgements (``Action/awaitAcknowledgements(_:)``).
        var awaitsAcknowledgements = false
        /// What it reads is dropped (it was cut).
        var discardsReads = false
        /// Its close was recorded.
        var closeRecorded = false
        /// Its close was (or is due to be) recorded as a FIN cut's (``TrafficEvent/CloseKind/cutByFault``): a RST its
        /// peer answers with is recorded too.
        var endedByFINCut = false
        /// A FIN cut's close is due to be recorded when its peer answers (its FIN, a reset, the socket's closure, the
        /// linger or the proxy's stop). Until then what its peer sends is recorded as read, never passed on: the
        /// proxy's TCP took it, as a capture of the leg (tcpdump's too) shows, and a message in it that its producer
        /// never sends again is lost.
        var cutRecordPending = false
        /// Its socket is closed.
        var closed = false
    }

    private(set) var phase: Phase
    /// Set only by the machine (here and in its `RelayStateMachine+…` files).
    var legs = [Leg(), Leg()]
    /// Nothing passes any more: a fault cut it, a reset was passed on, or the proxy is stopping.
    private(set) var isCut = false
    /// A fault cut it (rather than a peer's reset).
    private(set) var isCutByFault = false
    /// The legs a scheduled linger will reset.
    private var lingering: [Side] = []

    // The state of the faults that act on bytes read or after a time (limit_data, reset_peer, timeout):
    // their rules are in RelayStateMachine+Faults.swift.
    /// Those faults on this connection, by the key of their shaping.
    var byteFaults: [ShapingKey: ByteFault] = [:]

    /// A machine for a connection whose upstream is being dialled, or (`connected`) is already up;
    /// `recorded`: legs whose close another relay already recorded (a connection moved to NIO).
    init(connected: Bool = false, recorded: Set<Side> = []) {
        phase = connected ? .relaying : .connecting
        for side in recorded { legs[side.slot].closeRecorded = true }
    }

    /// The leg facing `side`.
    func leg(_ side: Side) -> Leg { legs[side.slot] }

    /// Whether a reset from `side`'s peer came with no FIN before it (its own, or ours of a FIN cut): what went out to
    /// it unacknowledged reached an open socket, and its application may have read it (``TrafficEvent/PathEvent/acknowledgementsCut(_:upTo:)``).
    func peerResetWithoutFIN(_ side: Side) -> Bool { !leg(side).receivedFIN && !leg(side).endedByFINCut }

    // MARK: connecting

    /// The upstream answered.
    mutating func connected() -> [Action] {
        guard phase == .connecting else { return [] }
        phase = .relaying
        return []
    }

    /// The upstream refused, failed or did not answer in time (a timeout after it answered is ignored).
    mutating func connectFailed() -> [Action] {
        guard phase == .connecting else { return [] }
        phase = .finished
        legs[Side.client.slot].closed = true
        legs[Side.server.slot].closed = true
        // Forgotten before the client sees the reset, so that nothing counts it as live after.
        return [.recordUpstreamFailure, .close(.server), .finish, .reset(.client)]
    }

    // MARK: bytes

    /// Bytes for `side` are waiting (the socket did not take them all), or (`false`) all went.
    mutating func pendingChanged(_ side: Side, hasPending: Bool) -> [Action] {
        legs[side.slot].hasPending = hasPending
        guard !hasPending else { return [] }
        return passFIN(to: side)
    }

    /// `side`'s peer sent FIN.
    mutating func receivedFIN(_ side: Side) -> [Action] {
        guard phase == .relaying, !leg(side).receivedFIN else { return [] }
        legs[side.slot].receivedFIN = true
        var actions = recordPendingCut(side) + record(side, .fin)
        if leg(side).discardsReads {
            // A cut leg whose peer is done: closed if our FIN went too; a half-open leg stays silent
            // (its peer must not learn anything) until its linger resets it.
            return actions + (leg(side).sentFIN ? close(side) : [])
        }
        actions += passFIN(to: side.other)
        return actions
    }

    private mutating func passFIN(to side: Side) -> [Action] {
        guard phase == .relaying, !isCut, leg(side.other).receivedFIN, !leg(side).hasPending, !leg(side).sentFIN,
            !leg(side).awaitsAcknowledgements
        else { return [] }
        guard !leg(side).receivedFIN else {
            // Our FIN ends the leg both ways (NIO closes such a socket with it): its peer's
            // acknowledgements are read first.
            legs[side.slot].awaitsAcknowledgements = true
            return [.awaitAcknowledgements(side)]
        }
        return sendFIN(side)
    }

    /// `side` failed: reset by its peer (`reset`), or another error.
    mutating func failed(_ side: Side, reset: Bool) -> [Action] {
        guard phase == .relaying, !leg(side).closed else { return [] }
        var actions = recordPendingCut(side) + record(side, reset ? .reset : .error)
        // A peer that answers with a RST after a FIN (a FIN cut's, or its own: its socket closed, and what the proxy
        // wrote to it since met no reader) closed its socket with bytes unread: its reset is recorded after that
        // close, as a capture of the leg sees it, so that the audit knows its application may never have read what
        // its TCP took (a grpcio server a CPU hog had slowed, in a fresh-clone run, never read 30 messages it had
        // taken, and their resend counted as redelivered; s55q2: a grpcio server that sent GOAWAY and its FIN as a
        // partition began had taken messages it never read, and answered the bytes held for it with a RST).
        if reset, leg(side).endedByFINCut || leg(side).receivedFIN { actions.append(.recordClose(side, .reset, beforeReset: false)) }
        actions += close(side)
        let passOn = !isCut
        isCut = true
        let other = side.other
        if passOn, !leg(other).closed {
            // A leg done both ways is closed, not reset: its peer read every byte up to its FIN, and a capture sees no
            // RST on it (recording a reset would cast a doubt there that the capture's audit does not).
            let doneBothWays = leg(other).receivedFIN && leg(other).sentFIN
            actions += record(other, doneBothWays ? .fin : .reset, beforeReset: !doneBothWays)
            actions += doneBothWays ? close(other) : resetLeg(other)
        }
        return actions
    }

    /// `side`'s socket closed without an error first (NIO folds a peer's FIN into the closure when
    /// our FIN had already gone). A socket whose peer's FIN was read and ours had not gone can only have been reset:
    /// NIO reads nothing more from a socket whose input ended, and closes it on the socket's error without reporting
    /// it (a peer that closed its socket after its FIN answers the proxy's next bytes with a RST).
    mutating func closed(_ side: Side) -> [Action] {
        guard phase == .relaying, !leg(side).closed else { return [] }
        if leg(side).receivedFIN, !leg(side).sentFIN { return failed(side, reset: true) }
        var actions: [Action] = []
        if !isCut, !leg(side).receivedFIN { actions += receivedFIN(side) }
        guard !leg(side).closed else { return actions }
        actions += recordPendingCut(side) + record(side, isCutByFault ? .cutByFault : isCut ? .reset : .fin)
        legs[side.slot].closed = true
        return actions + finishIfClosed()
    }

    // MARK: cuts

    /// A fault cuts the connection the way `mode` says; the other leg of a one-sided cut (and both
    /// legs of a FIN cut, after 5 s) is reset once `linger` has passed.
    mutating func cut(_ mode: DisconnectMode, linger: ChaosDuration) -> [Action] {
        guard phase == .relaying, !isCut else { return [] }
        isCut = true
        isCutByFault = true
        var actions: [Action] = [.countCut]
        switch mode {
        case .reset:
            for side in Side.allCases where !leg(side).closed { actions += abort(side) }
        case .close, .truncate:  // truncate differs only below TLS: the connection sends no close_notify
            for side in Side.allCases where !leg(side).closed {
                legs[side.slot].endedByFINCut = !leg(side).closeRecorded
                legs[side.slot].cutRecordPending = !leg(side).closeRecorded
                actions.append(.discard(side))
                legs[side.slot].discardsReads = true
                legs[side.slot].awaitsAcknowledgements = false
                if !leg(side).sentFIN {
                    legs[side.slot].sentFIN = true
                    actions.append(.sendFIN(side))
                }
                if leg(side).receivedFIN { actions += recordPendingCut(side) + close(side) }
            }
            // Legs whose peers do not answer our FIN with theirs are reset after 5 s.
            if phase == .relaying { actions += scheduleLinger(.seconds(Int64(5)), Side.allCases) }
        case .clientOnly, .serverOnly:
            let side: Side = mode == .clientOnly ? .client : .server
            if !leg(side).closed { actions += abort(side) }
            if !leg(side.other).closed {
                legs[side.other.slot].discardsReads = true
                actions.append(.discard(side.other))
                actions += scheduleLinger(linger, [side.other])
            }
        }
        return actions + finishIfClosed()
    }

    /// The linger of a cut ran out: whatever it waited on is reset.
    mutating func lingerExpired() -> [Action] {
        let sides = lingering
        lingering = []
        var actions: [Action] = []
        for side in sides where !leg(side).closed { actions += abort(side) }
        return actions + finishIfClosed()
    }

    /// The proxy is stopping: whatever is still open is reset.
    mutating func terminate() -> [Action] {
        guard phase != .finished else { return [] }
        if phase == .connecting {
            phase = .finished
            legs[Side.client.slot].closed = true
            legs[Side.server.slot].closed = true
            return [.close(.server), .finish, .reset(.client)]
        }
        isCut = true
        var actions: [Action] = lingering.isEmpty ? [] : [.cancelLinger]
        lingering = []
        for side in Side.allCases where !leg(side).closed {
            actions += recordPendingCut(side)
            actions += record(side, isCutByFault ? .resetByFault : .reset, beforeReset: true) + [.discard(side)] + resetLeg(side)
        }
        return actions + finishIfClosed()
    }

    // MARK: helpers

    private mutating func abort(_ side: Side) -> [Action] {
        legs[side.slot].discardsReads = true
        return recordPendingCut(side) + record(side, .resetByFault, beforeReset: true) + [.discard(side)] + resetLeg(side)
    }

    /// The FIN cut's close of `side`, if it waited for its peer's answer (``Leg/cutRecordPending``).
    private mutating func recordPendingCut(_ side: Side) -> [Action] {
        guard leg(side).cutRecordPending else { return [] }
        legs[side.slot].cutRecordPending = false
        return record(side, .cutByFault)
    }

    /// Whether what `side` reads is recorded though it goes nowhere (a cut leg whose end was not recorded yet: a FIN
    /// cut's leg until its peer answers, the half-open leg of a one-sided cut until its linger resets it). The
    /// proxy's TCP acknowledged those bytes to their sender, as a capture of the leg shows: the audit counts them
    /// sent, and never delivered.
    func recordsDroppedReads(_ side: Side) -> Bool {
        leg(side).discardsReads && !leg(side).closeRecorded && !leg(side).closed
    }

    private mutating func record(_ side: Side, _ kind: TrafficEvent.CloseKind, beforeReset: Bool = false) -> [Action] {
        guard !leg(side).closeRecorded else {
            // A leg whose peer's own FIN was recorded, now reset by the proxy (a reset passed on, a fault's, the stop):
            // its RST follows that FIN on the wire, as a capture of the leg sees it, and its peer's TCP drops what it
            // took and its application had not read (a grpcio server that sent its FIN as a partition began, its
            // client's leg then reset: the live audit had counted delivered what tcpdump's audit of the run doubted).
            guard beforeReset, leg(side).receivedFIN, !leg(side).endedByFINCut, !leg(side).closed else { return [] }
            return [.recordClose(side, kind, beforeReset: true)]
        }
        legs[side.slot].closeRecorded = true
        return [.recordClose(side, kind, beforeReset: beforeReset)]
    }

    private mutating func close(_ side: Side) -> [Action] {
        guard !leg(side).closed else { return [] }
        legs[side.slot].closed = true
        return [.close(side)] + finishIfClosed()
    }

    private mutating func resetLeg(_ side: Side) -> [Action] {
        guard !leg(side).closed else { return [] }
        legs[side.slot].closed = true
        return [.reset(side)] + finishIfClosed()
    }

    private mutating func scheduleLinger(_ delay: ChaosDuration, _ sides: [Side]) -> [Action] {
        let cancel: [Action] = lingering.isEmpty ? [] : [.cancelLinger]
        lingering = sides
        return cancel + [.scheduleLinger(delay)]
    }

    private mutating func finishIfClosed() -> [Action] {
        guard phase == .relaying, legs.allSatisfy(\.closed) else { return [] }
        phase = .finished
        let cancel: [Action] = lingering.isEmpty ? [] : [.cancelLinger]
        lingering = []
        return cancel + [.finish]
    }
}
