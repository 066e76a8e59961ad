/// What reading a capture found, beside the events.
public struct CaptureStatistics: Hashable, Sendable {
    /// Packets read (after the filter).
    public var packets = 0
    /// Bytes of packet data read (captured lengths).
    public var capturedBytes = 0
    /// TCP segments decoded.
    public var tcpSegments = 0
    /// Packets that were not IPv4/IPv6 TCP, were IP fragments, or had broken headers.
    public var skippedPackets = 0
    /// Packets cut short by the capture's snapshot length (their missing bytes count as capture loss).
    public var truncatedPackets = 0
    /// TCP flows seen (one per direction pair of addresses and ports, per SYN).
    public var flows = 0
    /// Connections reported (`.opened` events): a paired client and server leg count once.
    public var connections = 0
    /// Connections made of two paired proxy legs.
    public var pairedConnections = 0
    /// Stream bytes reassembled and reported, each byte once per flow direction.
    public var payloadBytes = 0
    /// Payload bytes seen again (retransmissions and overlaps), reported once.
    public var retransmittedBytes = 0
    /// Segments that arrived ahead of a hole and waited for it.
    public var outOfOrderSegments = 0
    /// Stream bytes the capture never saw although the connection carried them (a hole the
    /// receiver acknowledged, or one still open at a FIN, RST or the end of the capture). They are
    /// capture loss, not message loss: nothing is made up for them.
    public var captureLossBytes = 0
    /// Holes counted in `captureLossBytes`.
    public var captureLossHoles = 0
    /// With a key log: flows that spoke TLS, those decrypted with no problem, their records decrypted and the
    /// application bytes those held (both ways).
    public var tlsConversations = 0
    public var tlsDecrypted = 0
    /// With a key log: TLS flows that could not be decrypted, in whole or in part (each a `protocol` anomaly).
    public var tlsFailed = 0
    /// With a key log: TLS flows whose client sent nothing after its ClientHello and whose keys are not in the log (a
    /// client killed while connecting, a probe): no application data, so nothing unaudited.
    public var tlsAbandoned = 0
    public var tlsRecords = 0
    public var tlsPlaintextBytes: Int64 = 0

    /// Empty statistics.
    public init() {}
}
