package import ChaosCore

/// What the ends' TCPs met on the connections one fault made dead (a partition, a stall, a NAT's death, an offline link,
/// a handoff's blackout), summed over those connections from the proxy's legs (``ChaosCore/DeadPathSeen``).
package struct DeadPathFigures: Sendable, Codable, Equatable {
    /// Connections whose path it made dead.
    package var connections = 0
    /// Whether the kernel dropped their segments (false: the proxy held the bytes, for at least one of them).
    package var inKernel = true
    /// The client ends.
    package var client = DeadPathSideFigures()
    /// The server ends.
    package var server = DeadPathSideFigures()
    /// Connections neither end closed while the path was dead (a fault's cut is not theirs).
    package var neitherClosed = 0

    /// Creates empty figures.
    package init() {}

    /// Adds one connection's.
    package mutating func add(_ seen: DeadPathSeen) {
        connections += 1
        inKernel = inKernel && seen.inKernel
        client.add(seen.client, inKernel: seen.inKernel, first: Self.closedFirst(seen.client, before: seen.server))
        server.add(seen.server, inKernel: seen.inKernel, first: Self.closedFirst(seen.server, before: seen.client))
        if Self.gaveUp(seen.client) == nil, Self.gaveUp(seen.server) == nil { neitherClosed += 1 }
    }

    /// These figures with one connection's more.
    package func adding(_ seen: DeadPathSeen) -> DeadPathFigures {
        var figures = self
        figures.add(seen)
        return figures
    }

    /// When `leg`'s end closed the connection itself (a fault's cut is the proxy's doing, not the end's).
    private static func gaveUp(_ leg: DeadPathLeg) -> Int64? {
        leg.closedHow?.isFaultCut == true ? nil : leg.closedAfter
    }

    /// Whether `leg`'s end closed, and before `other`'s did (or `other`'s did not): the end that gave up first.
    private static func closedFirst(_ leg: DeadPathLeg, before other: DeadPathLeg) -> Bool {
        guard let closed = gaveUp(leg) else { return false }
        return closed <= (gaveUp(other) ?? .max)
    }
}

/// One side's ends on a fault's dead paths.
package struct DeadPathSideFigures: Sendable, Codable, Equatable {
    /// Bytes they sent into the dead path that reached the proxy's kernel.
    package var sentBytes: Int64 = 0
    /// Of those, the bytes their TCP saw acknowledged: none on the kernel path (the acknowledgements were dropped), all
    /// of them when the proxy held them.
    package var acknowledgedToThemBytes: Int64 = 0
    /// Bytes of the proxy's they acknowledged meanwhile (on the kernel path, what was in flight as the drops began).
    package var acknowledgedByThemBytes: Int64 = 0
    /// Segments the proxy's TCP sent them again meanwhile: its retransmissions into the dead path.
    package var proxyRetransmissions: Int64 = 0
    /// Connections whose end here closed while the path was dead, with a FIN.
    package var closedFin = 0
    /// … with a reset.
    package var closedReset = 0
    /// Connections whose end here closed first (the end that gave up on the dead connection).
    package var closedFirst = 0

    /// Creates empty figures.
    package init() {}

    mutating func add(_ leg: DeadPathLeg, inKernel: Bool, first: Bool) {
        sentBytes += leg.sent
        if !inKernel { acknowledgedToThemBytes += leg.sent }
        acknowledgedByThemBytes += leg.acknowledged
        proxyRetransmissions += leg.retransmissions
        switch leg.closedHow {
        case .fin?: closedFin += 1
        case .reset?, .error?: closedReset += 1
        default: break
        }
        if first { closedFirst += 1 }
    }
}
