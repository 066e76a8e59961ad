import Synchronization

/// What faults have done so far, by kind, for `GET /metrics`: the occurrences begun, the connections they touched and
/// those on now. One tally is shared by the injectors of a run (its timeline, the control API's faults and toxics), so
/// the counters only grow; a kind, once seen, stays (its active count back at 0), so a dashboard's series do not vanish.
package final class FaultTally: Sendable {
    /// One kind's figures.
    package struct Counts: Sendable, Equatable {
        /// Occurrences begun.
        package var occurrences: Int64 = 0
        /// Connections they touched: live ones hit as an occurrence began, and new ones a lasting fault on every
        /// connection reached while it was on (counted as it ends).
        package var connectionsTouched: Int64 = 0
        /// Occurrences on now (an instant fault, a disconnect, is never on).
        package var active: Int64 = 0
    }

    private let counts = Mutex<[String: Counts]>([:])

    /// An empty tally.
    package init() {}

    /// An occurrence of `kind` began and hit `connections`; `lasting`: it stays on until ``ended(_:reached:)``.
    package func began(_ kind: String, connections: Int, lasting: Bool) {
        counts.withLock { counts in
            counts[kind, default: Counts()].occurrences += 1
            counts[kind, default: Counts()].connectionsTouched += Int64(max(connections, 0))
            if lasting { counts[kind, default: Counts()].active += 1 }
        }
    }

    /// A lasting occurrence of `kind` ended, having reached `reached` connections opened while it was on.
    package func ended(_ kind: String, reached: Int = 0) {
        counts.withLock { counts in
            counts[kind, default: Counts()].connectionsTouched += Int64(max(reached, 0))
            counts[kind, default: Counts()].active = max(0, counts[kind, default: Counts()].active - 1)
        }
    }

    /// Every kind seen so far, by name.
    package var byKind: [String: Counts] { counts.withLock { $0 } }
}
