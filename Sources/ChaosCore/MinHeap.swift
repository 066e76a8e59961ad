/// A binary min-heap: the smallest element first, O(log n) insert and removal.
package struct MinHeap<Element: Comparable>: Sendable where Element: Sendable {
    private var storage: [Element] = []

    /// An empty heap.
    package init() {}

    /// How many elements it holds.
    package var count: Int { storage.count }
    /// True when it holds none.
    package var isEmpty: Bool { storage.isEmpty }
    /// The smallest element.
    package var min: Element? { storage.first }

    /// Adds an element.
    package mutating func insert(_ element: Element) {
        storage.append(element)
        var child = storage.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard storage[child] < storage[parent] else { break }
            storage.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the smallest element.
    package mutating func popMin() -> Element? {
        guard !storage.isEmpty else { return nil }
        storage.swapAt(0, storage.count - 1)
        let smallest = storage.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smaller = parent
            if left < storage.count, storage[left] < storage[smaller] { smaller = left }
            if right < storage.count, storage[right] < storage[smaller] { smaller = right }
            guard smaller != parent else { break }
            storage.swapAt(parent, smaller)
            parent = smaller
        }
        return smallest
    }
}
