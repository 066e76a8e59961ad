import ChaosCore
import NIOCore

/// One stretch of time a connection's path was dead: when it began, what each leg's TCP had counted then, and what
/// each had counted when its end closed meanwhile. When it ends (the path comes back, or the connection ends), the
/// differences go to the audit as a ``ChaosCore/DeadPathSeen``: what each end sent into the dead path, what it
/// acknowledged, how often the proxy's TCP retransmitted to it, and which end gave up first.
struct DeadPathEpisode {
    /// When the path died (the run's clock).
    let began: Int64
    /// Each leg's counters then (by ``Side/slot``; nil where the socket could not say).
    let atStart: [TCPCounters?]
    /// Each leg's counters when it closed while the path was dead, and when and how its end closed it (nil: the proxy
    /// did: a fault's cut, a reset passed on, the run's end).
    var atClose: [(counters: TCPCounters?, after: Int64, how: TrafficEvent.CloseKind?)?] = [nil, nil]
}

extension ProxiedConnection {
    /// The path died: what the legs' TCPs counted so far is the baseline. Only where the sink wants it.
    func beginDeadPathEpisode() {
        guard trafficSink != nil else { return }
        deadPathEpisode = DeadPathEpisode(
            began: clock.now(),
            atStart: [legs[.client]!.channel.tcpCounters(), legs[.server]!.channel.tcpCounters()]
        )
    }

    /// `side`'s leg closed `how`, by its end or (`byProxy`) by the proxy: while the path is dead, its counters are read
    /// now, before the socket goes; only its end's own close says it gave up.
    func deadPathLegClosed(_ side: Side, _ how: TrafficEvent.CloseKind, byProxy: Bool) {
        guard var episode = deadPathEpisode, episode.atClose[side.slot] == nil else { return }
        let ends = byProxy || how.isFaultCut ? nil : how
        episode.atClose[side.slot] = (legs[side]!.channel.tcpCounters(), clock.now() - episode.began, ends)
        deadPathEpisode = episode
    }

    /// The path came back (or the connection ended while it was dead): what each end met goes to the audit.
    func endDeadPathEpisode() {
        guard let episode = deadPathEpisode else { return }
        deadPathEpisode = nil
        let now = clock.now()
        let inKernel = deadPathInKernel && KernelDeadPath.isInUse && (kernelFlows?.client != nil || kernelFlows?.server != nil)
        func leg(_ side: Side) -> DeadPathLeg {
            let closed = episode.atClose[side.slot]
            let start = episode.atStart[side.slot]
            let end = closed.map { $0.counters } ?? legs[side]!.channel.tcpCounters()
            let how = closed?.how
            let after = how == nil ? nil : closed?.after
            guard let start, let end else {
                return DeadPathLeg(sent: 0, acknowledged: 0, retransmissions: 0, closedAfter: after, closedHow: how)
            }
            return DeadPathLeg(
                sent: Int64(end.received &- start.received),
                acknowledged: Int64(end.acknowledged &- start.acknowledged),
                retransmissions: Int64(end.retransmissions &- start.retransmissions),
                closedAfter: after,
                closedHow: how
            )
        }
        recordPath(.deadPathSeen(DeadPathSeen(lasted: now - episode.began, inKernel: inKernel, client: leg(.client), server: leg(.server))))
    }
}
