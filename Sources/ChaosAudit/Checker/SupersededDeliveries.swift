import ChaosCore

/// Deliveries on a connection the consumer has left.
///
/// A consumer that takes its stream over on a new connection states there what it holds (a resume ack), and ends the
/// old connection soon after; what the proxy still writes to the old one meanwhile its TCP takes, but its application
/// may never read: a server that ends the old call when a new one takes the stream over drops what that call had not
/// read yet (a fresh-clone run, s60bq1: seqs 265 and 266 written to the old connection 0.3 s before the server ended
/// its call there, counted delivered, absent from its log), while one that drains the old connection first reads them.
/// Which one it was, only the consumer can say: when it ends the old connection, those seqs become unconfirmed (as
/// those a consumer's TCP took before a reset), settled by a resend, an ack that names one of them, or a lower one.
extension StreamLedger {
    /// The most seqs one stream holds as superseded; past it, deliveries on an old connection count as they come.
    static let supersededLimit: Int64 = 4096

    /// The consumer stated `ack` of this stream on the connection `order` (``ConnectionState/order``). An ack naming a
    /// superseded seq vouches for it and those before it: the consumer read them from the old connection.
    func consumerStated(_ ack: Int64, on order: ConnectionOrder) {
        if order > consumerAckedOn {
            consumerAckedOn = order
            consumerAckThere = ack
            consumerResumedAt = ack
        } else if order == consumerAckedOn, ack > consumerAckThere {
            consumerAckThere = ack
        }
        guard !superseded.isEmpty, superseded.contains(ack) else { return }
        for interval in superseded.intervals where interval.lower <= ack {
            for seq in interval.lower...min(interval.upper, ack) { _ = superseded.remove(seq) }
        }
    }

    /// Whether a first delivery of `seq` on `stream`'s connection comes after the consumer moved to a newer connection
    /// without saying it holds `seq`; if so, `stream` (the old connection's) and this ledger remember it.
    @inline(__always)
    func deliveredAfterMove(_ seq: Int64, _ stream: ConnectionStream) {
        guard stream.connectionOrder < consumerAckedOn, seq > consumerAckThere, superseded.count < Self.supersededLimit else { return }
        superseded.insert(seq)
        stream.superseded.insert(seq)
    }

    /// The consumer ended the RPC call that last delivered `stream`'s messages on its connection: it reads nothing more
    /// of it, and its stack drops what the call had taken and its application had not read (a handler that returns, or
    /// is cancelled when a new call takes its stream over, with messages unread: a fresh-clone run, s61, 222-231
    /// taken by the server's TCP on the old call 40 ms before it ended it, in no log). The seqs delivered there past the
    /// last ack the consumer stated on that connection (at most ``supersededLimit``), and not delivered by another of
    /// `others` nor vouched for, are unconfirmed. Only for a consumer that acknowledges: one that never does is judged
    /// by its TCP.
    /// `others` is asked only when a seq is past that ack (every call's end comes here; few leave anything unread). A seq
    /// one of them delivered stays delivered (``copyInDoubt(_:others:withdrawn:)``).
    /// `byReset`: the other side reset the call (its producer cancelled it), so the consumer's acks still read on the
    /// connection vouch for what they name (``ConnectionStream/endedUnread``).
    func consumerEndedCall(
        _ stream: ConnectionStream,
        byReset: Bool = false,
        others findOthers: () -> [ConnectionStream],
        withdrawn: (Int64) -> Void
    ) {
        let floor = stream.consumerAck ?? (owedFrom - 1)
        guard ackedUpTo != nil, let highest = stream.deliveredHere.max, highest > floor else { return }
        let others = findOthers()
        var looked: Int64 = 0
        for interval in stream.deliveredHere.intervals.reversed() where interval.upper > floor {
            for seq in max(interval.lower, floor + 1)...interval.upper {
                looked += 1
                if looked > Self.supersededLimit { return }
                _ = superseded.remove(seq)
                guard !confirmedAfterClose.contains(seq), !copyInDoubt(seq, others: others, withdrawn: withdrawn),
                    deliveredSeqs.remove(seq)
                else { continue }
                takenAfterClose.insert(seq)
                takenBeforeReset.insert(seq)
                leftUnread.insert(seq)
                if byReset { stream.endedUnread.insert(seq) }
            }
        }
        stream.superseded = SeqRangeSet()
    }

    /// The consumer stated `ack` on the connection of `stream`, whose call the other side had reset: what it names of the
    /// seqs that end put in doubt it did read (the call's bytes reach it in order), and they are delivered.
    func stated(_ ack: Int64, afterResetOf stream: ConnectionStream) {
        guard let lowest = stream.endedUnread.min, lowest <= ack else { return }
        for interval in stream.endedUnread.intervals where interval.lower <= ack {
            let upper = min(interval.upper, ack)
            confirmedAfterClose.insert(interval.lower, through: upper)
            leftUnread.remove(from: interval.lower, through: upper)
        }
        stream.endedUnread.remove(from: lowest, through: ack)
    }

    /// `seq` was written to a call before its consumer ended it and acknowledged by its TCP after: in doubt as those the
    /// call delivered past the consumer's last ack (``consumerEndedCall(_:others:)``): only an ack naming it, or a resend,
    /// settles it. Returns whether it is in doubt (only for a consumer that acknowledges, and a seq not delivered yet).
    /// Not when the consumer already named it in an ack stated on the call's connection (`stream`'s): its answer on a
    /// later call there can be read before its TCP's acknowledgement of the request on a loaded machine, and said then
    /// that it read it (an RPC pair's loop, s68: 195 unconfirmed, in the server's log).
    func takenAfterCallEnded(_ seq: Int64, on stream: ConnectionStream) -> Bool {
        guard ackedUpTo != nil, !deliveredSeqs.contains(seq), seq > stream.consumerAck ?? .min else { return false }
        takenAfterClose.insert(seq)
        takenBeforeReset.insert(seq)
        leftUnread.insert(seq)
        return true
    }

    /// The consumer ended the old connection whose `stream` delivered superseded seqs: those not vouched for since,
    /// nor delivered by another of `others` (the same stream on the connections still open), are unconfirmed.
    func consumerLeft(_ stream: ConnectionStream, others: [ConnectionStream], withdrawn: (Int64) -> Void) {
        defer { stream.superseded = SeqRangeSet() }
        for interval in stream.superseded.intervals {
            for seq in interval.lower...interval.upper where superseded.remove(seq) {
                guard !copyInDoubt(seq, others: others, withdrawn: withdrawn), deliveredSeqs.remove(seq) else { continue }
                takenAfterClose.insert(seq)
                takenBeforeReset.insert(seq)
                leftUnread.insert(seq)
            }
        }
    }
}
