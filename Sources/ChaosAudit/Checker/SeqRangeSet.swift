/// A set of sequence numbers stored as sorted, disjoint, non-adjacent closed intervals.
///
/// Memory grows with the number of holes, not with the number of members: a stream of a hundred
/// million consecutive seqs is one interval. Appending the next seq and removing the lowest one are O(1).
package struct SeqRangeSet: Sendable, Equatable, Codable {
    /// One closed interval `lower...upper`.
    package struct Interval: Sendable, Equatable, Codable {
        /// The lowest member.
        package var lower: Int64
        /// The highest member.
        package var upper: Int64
        /// How many members.
        package var count: Int64 {
            let (span, overflow) = upper.subtractingReportingOverflow(lower)
            return overflow || span == .max ? .max : span + 1
        }
    }

    /// The intervals, ascending.
    package private(set) var intervals: [Interval] = []
    /// How many members.
    package private(set) var count: Int64 = 0

    /// An empty set.
    package init() {}

    /// Whether there are no members.
    package var isEmpty: Bool { intervals.isEmpty }
    /// The lowest member.
    package var min: Int64? { intervals.first?.lower }
    /// The highest member.
    package var max: Int64? { intervals.last?.upper }

    /// The index of the first interval whose upper bound is >= `value` (or `intervals.count`).
    private func firstIndex(reaching value: Int64) -> Int {
        var low = 0
        var high = intervals.count
        while low < high {
            let mid = (low + high) >> 1
            if intervals[mid].upper < value { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Whether `value` is a member.
    package func contains(_ value: Int64) -> Bool {
        if let last = intervals.last, value >= last.lower { return value <= last.upper }
        let index = firstIndex(reaching: value)
        return index < intervals.count && intervals[index].lower <= value
    }

    /// The interval that holds `value`, if it is a member.
    package func interval(containing value: Int64) -> Interval? {
        let index = firstIndex(reaching: value)
        guard index < intervals.count, intervals[index].lower <= value else { return nil }
        return intervals[index]
    }

    /// Adds `value`; returns false when it was already a member. The next seq of the last interval (a stream in
    /// order) is inlined at the caller: one comparison and one store.
    @discardableResult @inline(__always)
    package mutating func insert(_ value: Int64) -> Bool {
        let last = intervals.count &- 1
        if last >= 0, value == intervals[last].upper &+ 1 {
            intervals[last].upper = value
            count &+= 1
            return true
        }
        return insertElsewhere(value)
    }

    /// ``insert(_:)`` of a value that does not extend the last interval.
    private mutating func insertElsewhere(_ value: Int64) -> Bool {
        let last = intervals.count - 1
        if last >= 0 {
            let tail = intervals[last]
            if value == tail.upper &+ 1 {
                intervals[last].upper = value
                count += 1
                return true
            }
            if value > tail.upper {
                intervals.append(Interval(lower: value, upper: value))
                count += 1
                return true
            }
            if value >= tail.lower { return false }
        } else {
            intervals.append(Interval(lower: value, upper: value))
            count = 1
            return true
        }
        let index = firstIndex(reaching: value)
        if index < intervals.count, intervals[index].lower <= value { return false }
        let joinsLeft = index > 0 && intervals[index - 1].upper == value &- 1
        let joinsRight = index < intervals.count && intervals[index].lower == value &+ 1
        switch (joinsLeft, joinsRight) {
        case (true, true):
            intervals[index - 1].upper = intervals[index].upper
            intervals.remove(at: index)
        case (true, false): intervals[index - 1].upper = value
        case (false, true): intervals[index].lower = value
        case (false, false): intervals.insert(Interval(lower: value, upper: value), at: index)
        }
        count += 1
        return true
    }

    /// Adds every member of `lower...upper`.
    package mutating func insert(_ lower: Int64, through upper: Int64) {
        guard lower <= upper else { return }
        if let tail = intervals.last, lower > tail.upper &+ 1 {
            intervals.append(Interval(lower: lower, upper: upper))
            count += upper - lower + 1
            return
        }
        // Merge every interval that overlaps or touches lower...upper.
        var first = firstIndex(reaching: lower &- 1)
        var merged = Interval(lower: lower, upper: upper)
        var end = first
        while end < intervals.count, intervals[end].lower <= upper &+ 1 {
            merged.lower = Swift.min(merged.lower, intervals[end].lower)
            merged.upper = Swift.max(merged.upper, intervals[end].upper)
            count -= intervals[end].count
            end += 1
        }
        if first > intervals.count { first = intervals.count }
        intervals.replaceSubrange(first..<end, with: [merged])
        count += merged.count
    }

    /// Adds every member of `other`.
    package mutating func formUnion(_ other: SeqRangeSet) {
        for interval in other.intervals { insert(interval.lower, through: interval.upper) }
    }

    /// Removes `value`; returns false when it was not a member. The lowest member of a first interval that keeps
    /// others (a stream delivered in order) is inlined at the caller.
    @discardableResult @inline(__always)
    package mutating func remove(_ value: Int64) -> Bool {
        if !intervals.isEmpty, value == intervals[0].lower, value != intervals[0].upper {
            intervals[0].lower = value &+ 1
            count &-= 1
            return true
        }
        return removeElsewhere(value)
    }

    /// ``remove(_:)`` of any other value.
    private mutating func removeElsewhere(_ value: Int64) -> Bool {
        guard let first = intervals.first else { return false }
        if value == first.lower {
            if first.lower == first.upper { intervals.removeFirst() } else { intervals[0].lower = value &+ 1 }
            count -= 1
            return true
        }
        let index = firstIndex(reaching: value)
        guard index < intervals.count, intervals[index].lower <= value else { return false }
        let interval = intervals[index]
        if interval.lower == interval.upper {
            intervals.remove(at: index)
        } else if interval.lower == value {
            intervals[index].lower = value &+ 1
        } else if interval.upper == value {
            intervals[index].upper = value &- 1
        } else {
            // value is strictly inside, so value ± 1 cannot overflow.
            intervals[index].upper = value - 1
            intervals.insert(Interval(lower: value + 1, upper: interval.upper), at: index + 1)
        }
        count -= 1
        return true
    }

    /// Removes every member in `lower...upper`.
    package mutating func remove(from lower: Int64, through upper: Int64) {
        guard lower <= upper else { return }
        let first = firstIndex(reaching: lower)
        var end = first
        var kept: [Interval] = []
        while end < intervals.count, intervals[end].lower <= upper {
            let interval = intervals[end]
            count -= Swift.min(interval.upper, upper) - Swift.max(interval.lower, lower) + 1
            if interval.lower < lower { kept.append(Interval(lower: interval.lower, upper: lower - 1)) }
            if interval.upper > upper { kept.append(Interval(lower: upper + 1, upper: interval.upper)) }
            end += 1
        }
        intervals.replaceSubrange(first..<end, with: kept)
    }

    /// Removes every member.
    package mutating func removeAll() {
        intervals.removeAll()
        count = 0
    }

    /// How many members lie in `lower...upper`.
    package func count(from lower: Int64, through upper: Int64) -> Int64 {
        guard lower <= upper else { return 0 }
        var total: Int64 = 0
        var index = firstIndex(reaching: lower)
        while index < intervals.count, intervals[index].lower <= upper {
            let interval = intervals[index]
            total += Swift.min(interval.upper, upper) - Swift.max(interval.lower, lower) + 1
            index += 1
        }
        return total
    }

    /// How many members are greater than `value`.
    package func count(above value: Int64) -> Int64 {
        guard let max, max > value else { return 0 }
        return count(from: value &+ 1, through: max)
    }

    /// The intervals of `lower...upper` that are not members, at most `limit` of them.
    package func holes(from lower: Int64, through upper: Int64, limit: Int = .max) -> [Interval] {
        guard lower <= upper else { return [] }
        var result: [Interval] = []
        var cursor = lower
        var index = firstIndex(reaching: lower)
        while cursor <= upper, result.count < limit {
            guard index < intervals.count, intervals[index].lower <= upper else {
                result.append(Interval(lower: cursor, upper: upper))
                break
            }
            let interval = intervals[index]
            if interval.lower > cursor { result.append(Interval(lower: cursor, upper: interval.lower - 1)) }
            if interval.upper >= upper { break }
            cursor = interval.upper + 1
            index += 1
        }
        return result
    }
}
