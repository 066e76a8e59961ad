/// The rules of a timeline by the time of their next occurrence: a binary min-heap, earliest first, ties in file
/// order. Taking the next occurrence of a timeline of R rules costs O(log R), so drawing N occurrences is
/// O(N log R), where scanning every rule's next occurrence each time was O(N · R) (20,000 rules took seconds).
struct RuleHeap {
    struct Entry {
        var at: ChaosDuration
        var rule: Int

        /// Earlier first; at the same time, the rule written first.
        func precedes(_ other: Entry) -> Bool { at < other.at || (at == other.at && rule < other.rule) }
    }

    private(set) var entries: [Entry] = []

    /// The heap of `entries`, in any order.
    init(_ entries: [Entry]) {
        self.entries = entries
        for index in stride(from: entries.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    /// The earliest rule.
    var first: Entry? { entries.first }

    /// The earliest rule's next occurrence is at `at` now (it stays in the heap).
    mutating func replaceFirst(at: ChaosDuration) {
        entries[0].at = at
        siftDown(0)
    }

    /// The earliest rule has no more occurrences.
    mutating func removeFirst() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        siftDown(0)
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < entries.count else { return }
            var child = left
            if left + 1 < entries.count, entries[left + 1].precedes(entries[left]) { child = left + 1 }
            guard entries[child].precedes(entries[parent]) else { return }
            entries.swapAt(child, parent)
            parent = child
        }
    }
}
