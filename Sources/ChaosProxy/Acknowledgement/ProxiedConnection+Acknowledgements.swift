import ChaosCore
import NIOCore

/// Reading what each leg's peer acknowledged, for the audit's "delivered": after writes (a poll
/// ``AcknowledgementTracker/pollInterval`` later, one per leg however many writes), on the leg's
/// own events, and before the proxy closes or resets it. Nothing here runs when the sink does not
/// want bytes.
extension ProxiedConnection {
    /// `count` bytes written to `side` reached its socket.
    func wrote(_ count: Int, to side: Side) {
        acknowledgements[side.slot].wrote(count)
        scheduleAcknowledgementPoll(side)
    }

    /// Something happened on `side`'s channel: its acknowledgements are read when bytes are outstanding.
    @inline(__always)
    func legHadEvent(_ side: Side) {
        if acknowledgements[side.slot].isOutstanding { pollAcknowledgements(side) }
    }

    /// Reads `side`'s acknowledgements now and records them when they moved; polls again later
    /// while bytes are outstanding. `beforeReset`: the proxy is about to reset the leg, so what its
    /// TCP already sent counts as taken (see ``AcknowledgementTracker``).
    func pollAcknowledgements(_ side: Side, beforeReset: Bool = false) {
        guard trafficSink != nil, acknowledgements[side.slot].isOutstanding,
            let kernel = legs[side]!.channel.kernelAcknowledgements()
        else { return }
        if !kernel.over { acknowledgements[side.slot].sawUnsent(kernel.notSent) }
        acknowledgements[side.slot].sawSent(kernel.sentOnce)
        let notSent = beforeReset && !kernel.over ? kernel.notSent : nil
        if let offset = acknowledgements[side.slot].update(kernelBytesAcked: kernel.bytesAcked, notSentBeforeReset: notSent) {
            let covered = recordMaps[side.slot].map { $0.newlyCovered(by: offset) } ?? (offset, nil)
            if let delivered = covered.delivered {
                trafficSink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .acknowledged(side, upTo: delivered)))
            }
            if let taken = covered.afterClose {
                trafficSink?.record(TrafficEvent(time: clock.now(), connection: id, kind: .acknowledgedAfterClose(side, upTo: taken)))
            }
        }
        if !kernel.over, acknowledgements[side.slot].isOutstanding { scheduleAcknowledgementPoll(side) }
    }

    /// `side`'s peer reset its leg without a FIN first: what went out to it and was never seen acknowledged may have
    /// been read (see ``AcknowledgementTracker/sentUnacknowledged``), and no acknowledgement of it can come any more.
    /// A peer that had sent FIN closed its socket: what reached it since met no reader, and stays not delivered.
    func recordAcknowledgementsCutByPeerReset(_ side: Side) {
        guard let sink = trafficSink, machine.peerResetWithoutFIN(side),
            let sent = acknowledgements[side.slot].sentUnacknowledged
        else { return }
        let upTo = recordMaps[side.slot].map { $0.plaintext(coveredBy: sent).delivered } ?? sent
        sink.record(TrafficEvent(time: clock.now(), connection: id, kind: .path(.acknowledgementsCut(side, upTo: upTo))))
    }

    /// The machine's ``RelayStateMachine/Action/awaitAcknowledgements(_:)``: once the bytes handed to
    /// `side`'s channel reached its socket, reads what its peer acknowledged until nothing is
    /// outstanding or ``RelayStateMachine/acknowledgementWait`` passed, then tells the machine (which
    /// sends the FIN: NIO closes a socket shut both ways with it, and what its peer acknowledged after
    /// that could no longer be read).
    func awaitAcknowledgements(_ side: Side) {
        guard trafficSink != nil else { return perform(machine.acknowledgementsSettled(side)) }
        legs[side]!.shaper.whenWritten { [self] in
            let deadline = eventLoop.now + .nanoseconds(RelayStateMachine.acknowledgementWait.nanoseconds)
            waitForAcknowledgement(side, until: deadline)
        }
    }

    private func waitForAcknowledgement(_ side: Side, until deadline: NIODeadline) {
        pollAcknowledgements(side)
        let waiting =
            acknowledgements[side.slot].isOutstanding && legs[side]!.channel.isActive
            && machine.leg(side).awaitsAcknowledgements && eventLoop.now < deadline
        guard waiting else { return perform(machine.acknowledgementsSettled(side)) }
        eventLoop.scheduleTask(in: .nanoseconds(AcknowledgementTracker.pollInterval)) { [self] in
            waitForAcknowledgement(side, until: deadline)
        }
    }

    /// Cancels the polls (the connection is over).
    func stopAcknowledgementPolls() {
        for slot in 0..<2 {
            acknowledgementPolls[slot]?.cancel()
            acknowledgementPolls[slot] = nil
        }
    }

    private func scheduleAcknowledgementPoll(_ side: Side) {
        guard acknowledgementPolls[side.slot] == nil, machine.phase != .finished else { return }
        acknowledgementPolls[side.slot] = eventLoop.scheduleTask(in: .nanoseconds(AcknowledgementTracker.pollInterval)) { [weak self] in
            guard let self else { return }
            acknowledgementPolls[side.slot] = nil
            pollAcknowledgements(side)
        }
    }
}

extension Side {
    /// 0 for the client leg, 1 for the server leg: an index into per-leg arrays.
    var slot: Int { self == .client ? 0 : 1 }
}
