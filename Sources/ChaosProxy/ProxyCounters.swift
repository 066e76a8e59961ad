import Synchronization

/// Running totals of one proxy, safe to read from any thread.
package final class ProxyCounters: Sendable {
    private let upstreamBytes = Atomic<Int64>(0)
    private let downstreamBytes = Atomic<Int64>(0)
    private let openedCount = Atomic<Int64>(0)
    private let cutCount = Atomic<Int64>(0)
    private let failedUpstreamCount = Atomic<Int64>(0)
    private let splicedBytes = Atomic<Int64>(0)
    private let datagramsRead = Atomic<Int64>(0)
    private let reboundFlows = Atomic<Int64>(0)
    private let datagramDrops = Mutex<[DatagramDrop: Int64]>([:])
    private let datagramAlterations = Mutex<[DatagramAlteration: Int64]>([:])

    /// Creates zeroed counters.
    package init() {}

    /// Bytes moved client→server.
    package var upstream: Int64 { upstreamBytes.load(ordering: .relaxed) }
    /// Bytes moved server→client.
    package var downstream: Int64 { downstreamBytes.load(ordering: .relaxed) }
    /// Connections fully established (both legs).
    package var opened: Int64 { openedCount.load(ordering: .relaxed) }
    /// Connections cut by a fault.
    package var cutByFault: Int64 { cutCount.load(ordering: .relaxed) }
    /// Client connections closed because the upstream could not be reached.
    package var upstreamFailures: Int64 { failedUpstreamCount.load(ordering: .relaxed) }
    /// Bytes (of ``upstream`` and ``downstream``) moved socket to socket through a pipe, never copied into the proxy.
    package var spliced: Int64 { splicedBytes.load(ordering: .relaxed) }

    /// Datagrams a UDP proxy read from either side.
    package var datagrams: Int64 { datagramsRead.load(ordering: .relaxed) }
    /// Datagrams a UDP proxy dropped, by why (reasons that dropped none are absent).
    package var datagramsDropped: [DatagramDrop: Int64] { datagramDrops.withLock { $0 } }

    /// UDP flows a `rebind` moved to a new upstream-facing port.
    package var flowsRebound: Int64 { reboundFlows.load(ordering: .relaxed) }

    func datagramRead(_ count: Int = 1) { datagramsRead.wrappingAdd(Int64(count), ordering: .relaxed) }
    func flowRebound() { reboundFlows.wrappingAdd(1, ordering: .relaxed) }
    /// Datagrams a UDP proxy's faults duplicated or held back (those that were never done are absent).
    package var datagramsAltered: [DatagramAlteration: Int64] { datagramAlterations.withLock { $0 } }

    func dropped(_ reason: DatagramDrop, count: Int = 1) { datagramDrops.withLock { $0[reason, default: 0] += Int64(count) } }
    func altered(_ what: DatagramAlteration) { datagramAlterations.withLock { $0[what, default: 0] += 1 } }
    func add(bytes: Int, producedBy upstream: Bool) {
        if upstream {
            upstreamBytes.wrappingAdd(Int64(bytes), ordering: .relaxed)
        } else {
            downstreamBytes.wrappingAdd(Int64(bytes), ordering: .relaxed)
        }
    }
    func add(splicedBytes count: Int) { splicedBytes.wrappingAdd(Int64(count), ordering: .relaxed) }
    func connectionOpened() { openedCount.wrappingAdd(1, ordering: .relaxed) }
    func connectionCut() { cutCount.wrappingAdd(1, ordering: .relaxed) }
    func upstreamFailed() { failedUpstreamCount.wrappingAdd(1, ordering: .relaxed) }
}
