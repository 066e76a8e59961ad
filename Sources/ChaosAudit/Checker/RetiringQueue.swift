import ChaosCore

/// Connections closed on both sides, in the order they closed: a FIFO with O(1) appends and removals.
struct RetiringQueue {
    private var items: [(id: ConnectionID, closedAt: Int64)] = []
    private var head = 0

    /// The oldest entry.
    var first: (id: ConnectionID, closedAt: Int64)? { head < items.count ? items[head] : nil }

    mutating func append(_ id: ConnectionID, closedAt: Int64) { items.append((id, closedAt)) }

    /// The connections waiting to retire, oldest first.
    var ids: some Sequence<ConnectionID> { items[head...].lazy.map(\.id) }

    mutating func removeFirst() {
        head += 1
        if head > 1024, head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        items.removeAll()
        head = 0
    }
}
