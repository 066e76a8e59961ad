/// The producer side of one stream and direction: numbers messages from 1, keeps every message the
/// consumer has not acknowledged (for retransmission after a resume), and stays bounded.
///
/// When more than `capacity` messages are unacknowledged the oldest are dropped and reported as a
/// gap, so the loss is explicit (a `GAP` marker) rather than silent.
package struct OutboundQueue: Sendable {
    /// Most unacknowledged messages kept.
    package let capacity: Int
    /// The seq the next message gets.
    package private(set) var nextSeq: Int
    /// Highest seq the consumer acknowledged.
    package private(set) var acknowledged: Int
    private var pending: [Int] = []  // seqs of unacknowledged, retained messages, ascending
    private var pendingStart = 0  // index of the first live element (amortised O(1) removal)

    /// A queue whose first message gets seq `lastAssigned + 1`.
    ///
    /// A queue restored after a restart passes the last seq the previous run assigned: those messages
    /// are gone with the old process, so a resume that finds them unacknowledged reports them as a gap.
    package init(capacity: Int, lastAssigned: Int = 0) {
        self.capacity = max(1, capacity)
        self.nextSeq = lastAssigned + 1
        self.acknowledged = 0
    }

    /// Highest seq assigned so far (0 when none).
    package var lastAssigned: Int { nextSeq - 1 }
    /// How many messages wait for an acknowledgement.
    package var unacknowledgedCount: Int { pending.count - pendingStart }
    /// The seqs that wait for an acknowledgement, oldest first.
    package var unacknowledged: [Int] { Array(pending[pendingStart...]) }
    /// Lowest seq still retained (the next seq when nothing is).
    var firstRetained: Int { pendingStart < pending.count ? pending[pendingStart] : nextSeq }

    /// Assigns the next seq to a new message; returns it and the seqs dropped to make room, if any.
    package mutating func append() -> (seq: Int, dropped: ClosedRange<Int>?) {
        let seq = nextSeq
        nextSeq += 1
        pending.append(seq)
        var dropped: ClosedRange<Int>?
        if unacknowledgedCount > capacity {
            let overflow = unacknowledgedCount - capacity
            let first = pending[pendingStart]
            let last = pending[pendingStart + overflow - 1]
            pendingStart += overflow
            dropped = first...last
        }
        compact()
        return (seq, dropped)
    }

    /// Records a cumulative acknowledgement: every seq ≤ `ack` was processed by the consumer.
    package mutating func acknowledge(upTo ack: Int) {
        guard ack > acknowledged else { return }
        acknowledged = min(ack, lastAssigned)
        while pendingStart < pending.count, pending[pendingStart] <= acknowledged { pendingStart += 1 }
        compact()
    }

    /// What to send after the consumer said (in HELLO / WELCOME) that it processed every seq ≤ `peerAck`:
    /// a gap for the seqs above it that are no longer retained, then every retained seq above it, in order.
    package mutating func resume(peerAck: Int) -> (gap: ClosedRange<Int>?, resend: [Int]) {
        acknowledge(upTo: peerAck)
        let from = max(peerAck, acknowledged) + 1
        let to = firstRetained - 1
        return (from <= to ? from...to : nil, unacknowledged)
    }

    /// Forgets every unacknowledged message (a consumer that does not resume will never ask for them).
    package mutating func discardUnacknowledged() {
        pending.removeAll()
        pendingStart = 0
    }

    private mutating func compact() {
        if pendingStart > 64, pendingStart * 2 > pending.count {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
    }
}
