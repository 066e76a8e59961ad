/// What each end's TCP met while a connection's path was dead (a partition, a stall, a NAT that forgot it, an offline
/// link, a handoff's blackout), as the proxy's leg to that end counted it (Linux `TCP_INFO`): the proxy's own doing,
/// which no capture shows.
package struct DeadPathSeen: Hashable, Sendable {
    /// How long the path was dead, nanoseconds.
    package var lasted: Int64
    /// Whether the kernel dropped the connection's segments (else the proxy held the bytes, and its kernel
    /// acknowledged them).
    package var inKernel: Bool
    /// The client's end.
    package var client: DeadPathLeg
    /// The server's end.
    package var server: DeadPathLeg

    /// Creates a record.
    package init(lasted: Int64, inKernel: Bool, client: DeadPathLeg, server: DeadPathLeg) {
        self.lasted = lasted
        self.inKernel = inKernel
        self.client = client
        self.server = server
    }
}

/// One end of a connection on a dead path.
package struct DeadPathLeg: Hashable, Sendable {
    /// Bytes the end sent into the dead path that the proxy's kernel took (`tcpi_bytes_received`): on the kernel path
    /// their acknowledgements were dropped, so the end's TCP saw none; held in the proxy, each was acknowledged.
    package var sent: Int64
    /// Bytes of the proxy's that the end acknowledged meanwhile (`tcpi_bytes_acked`): on the kernel path, what was in
    /// flight as the drops began.
    package var acknowledged: Int64
    /// Segments the proxy's TCP sent the end again meanwhile (`tcpi_total_retrans`): its retransmissions into the path.
    package var retransmissions: Int64
    /// When the end's close reached the proxy, nanoseconds after the path died (nil: it did not while it was dead).
    package var closedAfter: Int64?
    /// How it closed (`fin`, `reset`), when it did.
    package var closedHow: TrafficEvent.CloseKind?

    /// Creates a record.
    package init(
        sent: Int64,
        acknowledged: Int64,
        retransmissions: Int64,
        closedAfter: Int64? = nil,
        closedHow: TrafficEvent.CloseKind? = nil
    ) {
        self.sent = sent
        self.acknowledged = acknowledged
        self.retransmissions = retransmissions
        self.closedAfter = closedAfter
        self.closedHow = closedHow
    }
}
