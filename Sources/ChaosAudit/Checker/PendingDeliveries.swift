/// A message written to a consumer whose TCP has not acknowledged its last byte yet: what the audit
/// needs to judge it once it has (the frame's bytes are gone by then).
struct PendingDelivery {
    /// The offset just past the message's last byte in the bytes written to the consumer.
    var end: Int64
    /// The message's seq, when it is audited.
    var seq: Int64?
    /// The cumulative ack it carries for the other direction, when it carries one.
    var ack: Int64?
    /// The stream it belongs to on its connection. Unowned: the connection's `streams` keep it as long as the
    /// connection (and so these pending deliveries) live, and plain data costs no reference counting per message.
    unowned(unsafe) var stream: ConnectionStream
    /// Its consumer ended the call it was written on before its TCP acknowledged it: its stack may have dropped it.
    var callEndedFirst = false
}

/// Messages written to one consumer and waiting for its TCP's acknowledgement, oldest first (the
/// proxy writes in order, so acknowledgements release them from the front).
///
/// Bounded by what TCP lets a sender have unacknowledged (the peer's window); past ``capacity``
/// (an event stream without acknowledgements) the oldest are released unconfirmed.
struct PendingDeliveries {
    /// The most messages held per consumer.
    static let capacity = 1 << 20
    private var entries: [PendingDelivery] = []
    private var head = 0

    var isEmpty: Bool { head == entries.count }
    var count: Int { entries.count - head }

    mutating func append(_ entry: PendingDelivery) {
        if head > 0, head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 4096, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        entries.append(entry)
    }

    /// Removes and returns the oldest entry when it ends at or before `offset`.
    mutating func popFirst(endingBy offset: Int64) -> PendingDelivery? {
        guard head < entries.count, entries[head].end <= offset else { return nil }
        defer { head += 1 }
        return entries[head]
    }

    /// Removes and returns the oldest entry.
    mutating func popFirst() -> PendingDelivery? {
        guard head < entries.count else { return nil }
        defer { head += 1 }
        return entries[head]
    }

    /// Marks the entries still waiting that `matches` picks as written on a call their consumer then ended.
    mutating func markCallEnded(where matches: (PendingDelivery) -> Bool) {
        for index in head..<entries.count where matches(entries[index]) { entries[index].callEndedFirst = true }
    }

    /// The entries still waiting, oldest first.
    var waiting: ArraySlice<PendingDelivery> { entries[head...] }

    mutating func removeAll() {
        entries = []
        head = 0
    }
}
