import ChaosCore

/// Everything known about one logical stream in one direction, across all the connections that carried it.
///
/// Memory is bounded by the number of anomalies: delivered seqs and seqs cut in flight are range sets.
final class StreamLedger {
    let index: Int
    let name: String
    let direction: Direction
    /// The receiver whose copy of the stream this is (``ProtocolSession/receiver``: a subscriber); nil when
    /// the stream has one consumer at a time.
    let receiver: String?
    let seqStart: Int64
    /// The first seq the consumer is owed: ``seqStart``, or for a receiver that subscribed while the stream was under
    /// way, the first seq its producer sent after that (what came before is none of its business, and not lost).
    let owedFrom: Int64
    /// The weakest delivery contract its messages carried, as their producer sent them (nil: the protocol promises
    /// none per message).
    private(set) var contract: DeliveryContract?
    /// sent, delivered, recovered, duplicated, redelivered, reordered, gaps, truncated are counted as they happen;
    /// ok, lost and unacked are derived in ``result(final:)``.
    var counts = DeliveryCounts()
    /// Seqs delivered at least once.
    var deliveredSeqs = SeqRangeSet()
    /// Seqs counted redelivered, while the copy that made them so may still fall into doubt (``DoubtedCopies``).
    var redeliveredSeqs = SeqRangeSet()
    /// Seqs that were read from the producer on a connection that ended before writing them.
    var cutInFlight = SeqRangeSet()
    /// Seqs first delivered as retained state sent again (``ProtocolEvent/retained``), whose live copy has not come yet.
    var retainedFirst = SeqRangeSet()
    /// The highest seq delivered (seqStart - 1 before the first).
    var highestDelivered: Int64
    /// The highest seq read from the producer (seqStart - 1 before the first).
    var highestSent: Int64
    /// The highest seq written to the consumer, acknowledged or not yet (seqStart - 1 before the first).
    var highestWritten: Int64
    /// The highest cumulative ack from the other direction.
    var ackedUpTo: Int64?
    /// Seqs whose delivery is unconfirmed: bytes a consumer's TCP took after it had ended its TLS session
    /// (close_notify), whose application may or may not have read them, and messages written to a connection that
    /// ended before their acknowledgement was read. They count delivered only once the consumer's own ack vouches.
    var takenAfterClose = SeqRangeSet()
    /// The seqs of ``takenAfterClose`` the consumer's acks vouched for.
    var confirmedAfterClose = SeqRangeSet()
    /// The seqs of ``takenAfterClose`` an ack the consumer wrote afterwards denied: it said it had processed less.
    var deniedAfterClose = SeqRangeSet()
    /// The seqs of ``takenAfterClose`` whose consumer's TCP did acknowledge them, on a connection that then ended
    /// abortively (``unconfirmAborted(_:)``), and those written to a consumer whose acknowledgements' way back was cut
    /// before any came (a QUIC stream of a connection that died on its flow's move): unsettled, they are unconfirmed
    /// rather than lost.
    var takenBeforeReset = SeqRangeSet()
    /// Seqs an earlier connection delivered above a resume point the consumer gave since (``resumed(after:on:)``),
    /// not delivered again on that connection or a later one: its application never had them.
    var disowned = SeqRangeSet()
    /// The connection (its ``ConnectionState/order``) that gave the last resume point: deliveries on it or on later
    /// connections settle ``disowned``.
    var resumedOn: ConnectionOrder = 0
    /// The newest connection on which a fan-out receiver named what it holds of this stream, and that point
    /// (``receiverResumed(after:on:)``).
    var receiverResumedOn: ConnectionOrder = 0
    var receiverResumedAt: Int64 = .min
    /// Connections the consumer closed after they delivered past its last ack there, until it names its next resume
    /// point (``resumePointNamed(_:on:others:)``).
    var closedPastAck: [ConnectionStream] = []
    /// The newest connection (its ``ConnectionState/order``) on which the consumer stated an ack of this stream (0: none
    /// yet), and the highest ack it stated there: a consumer that moved to a newer connection may never read what an
    /// older one still delivers.
    var consumerAckedOn: ConnectionOrder = 0
    var consumerAckThere: Int64 = .min
    /// The first ack the consumer stated on ``consumerAckedOn``: its resume point there. Its later acks there name what
    /// it took there since (its highest seq processed), nothing about what only an older connection carried.
    var consumerResumedAt: Int64 = .min
    /// Seqs first delivered on a connection older than ``consumerAckedOn``, above the ack stated there, and not yet
    /// vouched for (``SupersededDeliveries``).
    var superseded = SeqRangeSet()
    /// Seqs a reader the consumer has since left took and may never have read (an old connection or call it ended:
    /// ``SupersededDeliveries``): an ack vouches for them only by naming one of them.
    var leftUnread = SeqRangeSet()
    /// The ledger of the same stream in the other direction (where acks for this one travel).
    var partnerIndex: Int?
    /// A `seq jump` was already reported for this stream.
    var reportedSeqJump = false
    /// Faults waiting for this stream's first new message (see ``RecoveryTracker``).
    var resumeWaits: [(watch: FaultWatch, baseline: Int64)] = []

    init(index: Int, name: String, direction: Direction, receiver: String? = nil, seqStart: Int64, owedFrom: Int64? = nil) {
        self.index = index
        self.name = name
        self.direction = direction
        self.receiver = receiver
        self.seqStart = seqStart
        self.owedFrom = max(seqStart, owedFrom ?? seqStart)
        highestDelivered = self.owedFrom - 1
        highestSent = self.owedFrom - 1
        highestWritten = self.owedFrom - 1
    }

    /// The stream's result; a checkpoint (`final` false) does not yet count seqs still in flight as lost. `owedThrough`:
    /// for a receiver's copy of a stream that fans out, the highest seq its producer sent: the seqs past the last one
    /// it got are owed to it too (a subscriber that stops getting messages has lost the rest).
    func result(final: Bool, owedThrough: Int64? = nil) -> StreamResult {
        var result = counts
        let taken = takenSeqs
        result.ok = taken.count
        let upper = lostUpper(final: final, owedThrough: owedThrough, taken: taken)
        let expected = max(0, upper - owedFrom + 1)
        // Judged at the end only (a checkpoint counts them with the lost: a resend or an ack may still settle them).
        let unconfirmed = final ? unconfirmedSeqs : SeqRangeSet()
        result.unconfirmed = unconfirmed.count
        result.lost = expected - accounted(taken, unconfirmed).count(from: owedFrom, through: upper)
        if let ackedUpTo { result.unacked = taken.count(above: ackedUpTo) }
        result.updateRatio()
        var stream = StreamResult(
            stream: name,
            direction: direction,
            receiver: receiver,
            counts: result,
            firstSeq: taken.min,
            highestSeq: taken.max,
            ackedUpTo: ackedUpTo
        )
        stream.contract = contract
        return stream
    }

    /// The most seqs ``placement(of:producer:)`` looks at one by one; past it, the rest are not placed.
    static let placementLimit: Int64 = 1_000_000

    /// Where the seqs of `ranges` (this receiver's losses) died: `producer` is the stream this receiver's copy came
    /// from, as its producer sent it to the server (nil: unknown, every loss then counts as the server's).
    func placement(of ranges: [SeqRangeSet.Interval], producer: StreamLedger?) -> LossPlacement {
        var placed = LossPlacement()
        var looked: Int64 = 0
        for range in ranges {
            for seq in range.lower...range.upper {
                looked += 1
                if looked > Self.placementLimit { return placed }
                if cutInFlight.contains(seq) {
                    placed.serverToReceiver += 1
                } else if producer.map({ $0.deliveredSeqs.contains(seq) || $0.takenAfterClose.contains(seq) }) ?? true {
                    placed.atServer += 1
                } else {
                    placed.producerToServer += 1
                }
            }
        }
        return placed
    }

    /// The seq ranges counted as lost (for the anomaly list), at most `limit`; `owedThrough` as for ``result(final:owedThrough:)``.
    func lostRanges(final: Bool, limit: Int, owedThrough: Int64? = nil) -> [SeqRangeSet.Interval] {
        let taken = takenSeqs
        let upper = lostUpper(final: final, owedThrough: owedThrough, taken: taken)
        return accounted(taken, final ? unconfirmedSeqs : SeqRangeSet()).holes(from: owedFrom, through: upper, limit: limit)
    }

    /// The seqs that are not lost: those taken, and those whose delivery is unconfirmed.
    private func accounted(_ taken: SeqRangeSet, _ unconfirmed: SeqRangeSet) -> SeqRangeSet {
        guard !unconfirmed.isEmpty else { return taken }
        var all = taken
        all.formUnion(unconfirmed)
        return all
    }

    /// Seqs whose delivery no one can confirm or deny: taken by the consumer's TCP on a connection that ended abortively
    /// past its last ack (or written to it where no acknowledgement could come back), and since then neither vouched
    /// for by its acks, nor denied by an ack
    /// below them, nor delivered again. Its application may have read them or not (a stack that drops what it had
    /// buffered when the connection resets, or one that reads it all first): they are not lost, and not ok.
    var unconfirmedSeqs: SeqRangeSet {
        var unconfirmed = SeqRangeSet()
        guard !takenBeforeReset.isEmpty else { return unconfirmed }
        var resolved = deliveredSeqs
        resolved.formUnion(confirmedAfterClose)
        resolved.formUnion(deniedAfterClose)
        for interval in takenBeforeReset.intervals {
            for hole in resolved.holes(from: interval.lower, through: interval.upper) { unconfirmed.insert(hole.lower, through: hole.upper) }
        }
        return unconfirmed
    }

    /// The consumer wrote an ack of `ack` after seqs above it were taken after a close: it says it never processed them.
    /// Not those of `spared`: the call it acks on ended by the other side's reset, and its acks still read there were
    /// written before it learnt of that end (``ConnectionStream/endedUnread``).
    func denyTakenAfterClose(above ack: Int64, sparing spared: SeqRangeSet = SeqRangeSet()) {
        guard let highest = takenAfterClose.max, highest > ack else { return }
        for interval in takenAfterClose.intervals where interval.upper > ack {
            let lower = max(interval.lower, ack + 1)
            guard !spared.isEmpty else {
                deniedAfterClose.insert(lower, through: interval.upper)
                continue
            }
            for kept in spared.holes(from: lower, through: interval.upper) { deniedAfterClose.insert(kept.lower, through: kept.upper) }
        }
    }

    /// The highest seq that counts as lost when missing.
    private func lostUpper(final: Bool, owedThrough: Int64?, taken: SeqRangeSet) -> Int64 {
        var upper = max(highestDelivered, taken.max ?? highestDelivered)
        if final { upper = max(upper, highestSent, owedThrough ?? upper) }
        if let cut = cutInFlight.max { upper = max(upper, cut) }
        return upper
    }

    /// The consumer acknowledged every seq up to `ack`. That vouches for the seqs it took after its TLS close only when
    /// no delivered seq explains `ack`: a consumer whose "cumulative" ack is really the highest seq it saw would cover a
    /// seq its TLS stack dropped as soon as a later one arrives (a producer that skipped it on resume must still be
    /// caught), while an ack naming a seq that nothing delivered can only come from what it took after close, and a
    /// consumer that read a seq from its socket had read every byte before it there. The ack may arrive after the
    /// producer's resends past it were delivered (a resume ack read late): it still names an undelivered seq.
    /// It does not vouch for seqs an earlier ack denied (``denyTakenAfterClose(above:)``): the consumer said it never
    /// processed them, and its ack naming a seq it took since, on a later connection, says nothing of the bytes an
    /// earlier one had taken.
    /// Nor for those a reader the consumer has left took (``leftUnread``): only an ack naming one of them vouches,
    /// for it and those of them before it (which then leave ``leftUnread``: settled, they need no more excluding).
    /// And only for the doubted run that holds the named seq (or the last one below it): the consumer read its socket
    /// in order up to it there, which says nothing of a run an earlier connection took and was torn down with (s67: an
    /// RPC server's ack of 380 vouched for 228-234, taken on a call a protocol fault's grace had closed, in no log).
    func confirmTakenAfterClose(upTo ack: Int64) {
        guard namesUndelivered(ack) else { return }
        var excluded = deniedAfterClose
        if !leftUnread.isEmpty {
            if let named = leftUnread.interval(containing: ack) {
                for kept in deniedAfterClose.holes(from: named.lower, through: ack) {
                    confirmedAfterClose.insert(kept.lower, through: kept.upper)
                }
                leftUnread.remove(from: named.lower, through: ack)
            }
            excluded.formUnion(leftUnread)
        }
        // What it read in order on its socket ends at the named seq: the doubted run that holds it (or the last one
        // below it, when the ack names one still in flight). An earlier run was taken on an earlier connection, whose
        // reader it may have left with them unread.
        guard let interval = takenAfterClose.interval(containing: ack) ?? takenAfterClose.intervals.last(where: { $0.upper < ack })
        else { return }
        let upper = min(interval.upper, ack)
        guard !excluded.isEmpty else { return confirmedAfterClose.insert(interval.lower, through: upper) }
        for kept in excluded.holes(from: interval.lower, through: upper) {
            confirmedAfterClose.insert(kept.lower, through: kept.upper)
        }
    }

    /// Whether `ack` names a seq nothing delivered (only such an ack can vouch: ``confirmTakenAfterClose(upTo:)``).
    func namesUndelivered(_ ack: Int64) -> Bool { ack > highestDelivered || !deliveredSeqs.contains(ack) }

    /// The most seqs ``unconfirmAborted(_:)`` moves at once: a consumer that acknowledges more rarely than that is
    /// judged by its TCP, as one that never acknowledges.
    static let abortedLimit: Int64 = 4096

    /// The connection that delivered `here` ended abortively (a RST): its consumer may never have read what its TCP
    /// took after its last app-level ack (a socket closed with unread data, a write that failed with EPIPE and dropped
    /// the connection unread). Those seqs become unconfirmed, as bytes taken after a TLS close are: the consumer's
    /// later ack vouches for them, a resend delivers them once, neither leaves them lost. Only for a consumer that
    /// acknowledges (``ackedUpTo`` set). Past the last ack that reached the producer: one the proxy had read but not
    /// yet passed on (a latency held it) may be seen or not by a capture, whose wire shows bytes the proxy never read
    /// before its reset; what it would have said, the consumer's next ack says again (or the seqs stay unconfirmed).
    /// A seq another connection delivered too stays delivered (``copyInDoubt(_:others:withdrawn:)``): `others` finds the
    /// stream's states on the other connections, asked only when a seq is past the last ack.
    /// Where the consumer had already named its resume point on a newer connection than `order` (the one that ended),
    /// those past that point are denied, not doubted, as the in-flight ones of a cut are (``consumerResumedAt``): it
    /// said it would take them there.
    func unconfirmAborted(
        _ here: SeqRangeSet,
        on order: ConnectionOrder,
        others findOthers: () -> [ConnectionStream],
        withdrawn: (Int64) -> Void
    ) {
        guard let ackedUpTo, let highest = here.max, highest > ackedUpTo, here.count(above: ackedUpTo) <= Self.abortedLimit else { return }
        let others = findOthers()
        // The highest delivered seq stays: the consumer's TCP did take them in order, so a resume past them (its ack
        // vouching) is no gap, and their resend no reordering.
        for interval in here.intervals where interval.upper > ackedUpTo {
            for seq in max(interval.lower, ackedUpTo + 1)...interval.upper where !confirmedAfterClose.contains(seq) {
                guard !copyInDoubt(seq, others: others, withdrawn: withdrawn), deliveredSeqs.remove(seq) else { continue }
                takenAfterClose.insert(seq)
                takenBeforeReset.insert(seq)
                // s79 (an RPC server through a partition): seq 95, taken by its TCP on the old call and never read,
                // its resume point of 94 named on the new call before the old one's reset reached the audit; the
                // client skipped 95 on resume, and it stayed unconfirmed, where the reset read first denied it.
                if resumedBelow(seq, newerThan: order) { deniedAfterClose.insert(seq) }
            }
        }
    }

    /// The consumer, on the connection `order` (``ConnectionState/order``), says it holds the stream up to `point` and
    /// resumes after it: what earlier connections delivered above it (at most ``abortedLimit`` seqs) is disowned until
    /// delivered again.
    func resumed(after point: Int64, on order: ConnectionOrder) {
        resumedOn = max(resumedOn, order)
        guard highestDelivered > point else { return }
        var looked: Int64 = 0
        for interval in deliveredSeqs.intervals where interval.upper > point {
            let lower = max(interval.lower, point + 1)
            let upper = min(interval.upper, lower + Self.abortedLimit - looked - 1)
            guard lower <= upper else { break }
            disowned.insert(lower, through: upper)
            looked += upper - lower + 1
        }
    }

    /// A fan-out receiver, on the connection `order`, says its application holds this stream up to `point`
    /// (`fanout.resume`): besides disowning what earlier connections delivered above it (``resumed(after:on:)``), the
    /// copies their TCP took past it unconfirmed (a cut or a reset) were never its application's: denied, lost unless
    /// handed again (s81v2: u1's seq 42, written to u3's old connection into a partition, its acknowledgements cut; u3
    /// came back saying it held 41, the buggy room server skipped 42, and it stayed unconfirmed, not lost).
    func receiverResumed(after point: Int64, on order: ConnectionOrder) {
        resumed(after: point, on: order)
        if order > receiverResumedOn {
            receiverResumedOn = order
            receiverResumedAt = point
        }
        denyTakenAfterClose(above: point)
    }

    /// Whether the consumer, on a connection newer than `order`, has named a resume point below `seq` (a consumer's
    /// first ack there, or a fan-out receiver's `fanout.resume`): a copy of `seq` that `order` took unconfirmed is
    /// then denied, not doubted.
    @inline(__always)
    func resumedBelow(_ seq: Int64, newerThan order: ConnectionOrder) -> Bool {
        (order < consumerAckedOn && seq > consumerResumedAt) || (order < receiverResumedOn && seq > receiverResumedAt)
    }

    /// A delivery of `seq` on the connection `order` settles it if it was disowned.
    @inline(__always)
    func settleDisowned(_ seq: Int64, on order: ConnectionOrder) {
        if order >= resumedOn { _ = disowned.remove(seq) }
    }

    /// The seqs the consumer has: those delivered, and those taken after its TLS close that its acks vouched for, but
    /// those it disowned by resuming below them.
    private var takenSeqs: SeqRangeSet {
        guard !confirmedAfterClose.isEmpty || !disowned.isEmpty else { return deliveredSeqs }
        var taken = deliveredSeqs
        taken.formUnion(confirmedAfterClose)
        for interval in disowned.intervals {
            for seq in interval.lower...interval.upper { _ = taken.remove(seq) }
        }
        return taken
    }
}

/// One stream in one direction on one connection: what this connection delivered and what it holds in flight.
final class ConnectionStream {
    let ledger: StreamLedger
    /// Its connection's ``ConnectionState/order``.
    let connectionOrder: ConnectionOrder
    /// The name a message gave it (its bytes as read), or nil for the connection's default stream.
    var name: [UInt8]? = nil
    /// Seqs delivered on this connection (for duplicates within a connection).
    var deliveredHere = SeqRangeSet()
    /// Seqs read from the producer on this connection and not yet written to the consumer.
    var inFlight = SeqRangeSet()
    /// Seqs this connection delivered after the consumer had moved to a newer one (``StreamLedger/superseded``).
    var superseded = SeqRangeSet()
    /// The highest ack of this stream the consumer stated on this connection.
    var consumerAck: Int64?
    /// The RPC call that last delivered a message of this stream here (its identity only).
    var lastCall: ObjectIdentifier?
    /// Seqs delivered here that the call's end put in doubt when the other side reset it (its producer cancelled it):
    /// the consumer's acks read here afterwards were written before it learnt of the reset, and vouch for what they
    /// name (``StreamLedger/consumerEndedCall(_:others:withdrawn:)``).
    var endedUnread = SeqRangeSet()
    /// In-flight seqs read as retained state sent again (``ProtocolEvent/retained``).
    var retainedInFlight = SeqRangeSet()
    /// Read times of in-flight messages, oldest first, for transit latency.
    var transit = TransitQueue()

    init(ledger: StreamLedger, connectionOrder: ConnectionOrder) {
        self.ledger = ledger
        self.connectionOrder = connectionOrder
    }

    /// Whether this connection carried any message of the stream.
    var carriedTraffic: Bool { !deliveredHere.isEmpty || !inFlight.isEmpty }
}

/// A bounded FIFO of (seq, read time) pairs: the proxy keeps order, so a write matches the oldest read.
struct TransitQueue {
    static let capacity = 1 << 16
    private var seqs: [Int64] = []
    private var times: [Int64] = []
    private var head = 0

    var isEmpty: Bool { head == seqs.count }

    @inline(__always)
    mutating func push(_ seq: Int64, at time: Int64) {
        if head > 0, head == seqs.count {
            seqs.removeAll(keepingCapacity: true)
            times.removeAll(keepingCapacity: true)
            head = 0
        }
        guard seqs.count - head < Self.capacity else { return }
        if head >= 4096, head * 2 >= seqs.count {
            seqs.removeFirst(head)
            times.removeFirst(head)
            head = 0
        }
        seqs.append(seq)
        times.append(time)
    }

    /// The read time of `seq`, when it is among the oldest few queued (dropping older unmatched entries).
    @inline(__always)
    mutating func pop(_ seq: Int64) -> Int64? {
        var index = head
        let limit = min(seqs.count, head + 16)
        while index < limit {
            if seqs[index] == seq {
                let time = times[index]
                head = index + 1
                return time
            }
            index += 1
        }
        return nil
    }
}

extension StreamLedger {
    /// One of its messages carried `promise`: the stream is judged by the weakest.
    func carried(_ promise: DeliveryContract) {
        contract = contract.map { min($0, promise) } ?? promise
    }
}
