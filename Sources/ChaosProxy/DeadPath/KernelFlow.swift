package import ChaosCore
package import NIOCore

/// The packets of one leg going one way (from `source` to `destination`), as the kernel's packet filter matches them.
package struct KernelFlow: Hashable, Comparable, Sendable {
    /// The sender's address (IPv4 dotted or IPv6).
    package var sourceIP: String
    /// The sender's port.
    package var sourcePort: Int
    /// The receiver's address.
    package var destinationIP: String
    /// The receiver's port.
    package var destinationPort: Int

    /// A flow from `sourceIP`:`sourcePort` to `destinationIP`:`destinationPort`.
    package init(sourceIP: String, sourcePort: Int, destinationIP: String, destinationPort: Int) {
        self.sourceIP = sourceIP
        self.sourcePort = sourcePort
        self.destinationIP = destinationIP
        self.destinationPort = destinationPort
    }

    /// The flow from `source` to `destination`; nil when either is not an IP address with a port, or they are of two
    /// families. An IPv4-mapped IPv6 address (a dual-stack socket's peer) is its IPv4 address: that is what its packets
    /// carry.
    package init?(from source: SocketAddress?, to destination: SocketAddress?) {
        guard let source, let destination, let sourceIP = source.ipAddress, let destinationIP = destination.ipAddress,
            let sourcePort = source.port, let destinationPort = destination.port
        else { return nil }
        let from = Self.unmapped(sourceIP)
        let to = Self.unmapped(destinationIP)
        guard from.contains(":") == to.contains(":") else { return nil }
        self.init(sourceIP: from, sourcePort: sourcePort, destinationIP: to, destinationPort: destinationPort)
    }

    /// Whether it is an IPv6 flow.
    package var isIPv6: Bool { sourceIP.contains(":") }

    /// The flow as an element of an nftables set of `saddr . sport . daddr . dport`.
    package var setElement: String { "\(sourceIP) . \(sourcePort) . \(destinationIP) . \(destinationPort)" }

    /// The flow the other way.
    package var reversed: KernelFlow {
        KernelFlow(sourceIP: destinationIP, sourcePort: destinationPort, destinationIP: sourceIP, destinationPort: sourcePort)
    }

    package static func < (lhs: KernelFlow, rhs: KernelFlow) -> Bool {
        (lhs.sourceIP, lhs.sourcePort, lhs.destinationIP, lhs.destinationPort)
            < (rhs.sourceIP, rhs.sourcePort, rhs.destinationIP, rhs.destinationPort)
    }

    private static func unmapped(_ address: String) -> String {
        let prefix = "::ffff:"
        guard address.lowercased().hasPrefix(prefix), address.contains(".") else { return address }
        return String(address.dropFirst(prefix.count))
    }
}

/// What the kernel drops of a flow on a dead path.
package enum KernelDrop: String, Sendable, CaseIterable {
    /// Every segment: the path is dead both ways.
    case everything
    /// Every segment but a pure acknowledgement: the path is dead this way only, so the other way's bytes are still
    /// acknowledged (a one-way partition).
    case data
    /// None for good: each segment waits in the kernel's queue for the seeded loss model's verdict (``KernelLoss``).
    case queued
}

extension KernelDrop {
    /// What to drop of a connection's flows when its path is dead in `dead` (none: nothing), given its legs' flows of
    /// the bytes going up: `client` (client to proxy) and `server` (proxy to server); the flows down are their reverses.
    ///
    /// Both ways dead: every segment the proxy sends the ends (listen to client, proxy to server) is dropped, so no end
    /// ever hears from the path again, not even an acknowledgement: what an end sends still reaches the proxy's kernel
    /// (its first flight, then its retransmissions), and the proxy reads it and holds it as it always did, so that what
    /// each end does in the dead path (a heartbeat, a FIN, a reset) is seen when it does it. One way dead: that way's
    /// segments but pure acknowledgements are dropped on both legs, so the other way still flows and is acknowledged.
    ///
    /// A lossy direction (`lossy`) is lost on the client's leg, the phone's own link: its flow there (client to proxy
    /// going up, proxy to client going down) is queued for the loss model's verdicts, unless a dead path drops it.
    package static func drops(
        dead: Set<Direction>,
        lossy: Set<Direction> = [],
        client: KernelFlow?,
        server: KernelFlow?
    ) -> [(flow: KernelFlow, drop: KernelDrop?)] {
        let up = [client, server].compactMap { $0 }
        let down = up.map(\.reversed)
        var drops: [(flow: KernelFlow, drop: KernelDrop?)]
        if dead.count < Direction.allCases.count {
            drops = up.map { ($0, dead.contains(.upstream) ? .data : nil) } + down.map { ($0, dead.contains(.downstream) ? .data : nil) }
        } else {
            let fromProxy = [client?.reversed, server].compactMap { $0 }
            drops = (up + down).map { flow in (flow, fromProxy.contains(flow) ? .everything : nil) }
        }
        guard let client else { return drops }
        for (direction, flow) in [(Direction.upstream, client), (.downstream, client.reversed)] where lossy.contains(direction) {
            if let index = drops.firstIndex(where: { $0.flow == flow }), drops[index].drop == nil { drops[index].drop = .queued }
        }
        return drops
    }
}
