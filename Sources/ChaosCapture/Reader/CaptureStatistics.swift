package import ChaosTLSDecryption

/// What reading a capture found, beside the events.
package struct CaptureStatistics: Hashable, Sendable {
    /// Packets read (after the filter).
    package var packets = 0
    /// Bytes of packet data read (captured lengths).
    package var capturedBytes = 0
    /// TCP segments decoded.
    package var tcpSegments = 0
    /// Packets that were not IPv4/IPv6 TCP, were IP fragments, or had broken headers.
    package var skippedPackets = 0
    /// Packets cut short by the capture's snapshot length (their missing bytes count as capture loss).
    package var truncatedPackets = 0
    /// TCP flows seen (one per direction pair of addresses and ports, per SYN).
    package var flows = 0
    /// Connections reported (`.opened` events): a paired client and server leg count once.
    package var connections = 0
    /// Connections made of two paired proxy legs.
    package var pairedConnections = 0
    /// Stream bytes reassembled and reported, each byte once per flow direction.
    package var payloadBytes = 0
    /// Payload bytes seen again (retransmissions and overlaps), reported once.
    package var retransmittedBytes = 0
    /// Segments that arrived ahead of a hole and waited for it.
    package var outOfOrderSegments = 0
    /// Stream bytes the capture never saw although the connection carried them (a hole the
    /// receiver acknowledged, or one still open at a FIN, RST or the end of the capture). They are
    /// capture loss, not message loss: nothing is made up for them.
    package var captureLossBytes = 0
    /// Holes counted in `captureLossBytes`.
    package var captureLossHoles = 0
    /// With a key log: flows that spoke TLS, those decrypted with no problem, their records decrypted and the
    /// application bytes those held (both ways).
    package var tlsConversations = 0
    package var tlsDecrypted = 0
    /// With a key log: TLS flows that could not be decrypted, in whole or in part (each a `protocol` anomaly).
    package var tlsFailed = 0
    /// With a key log: TLS flows whose client sent nothing after its ClientHello and whose keys are not in the log (a
    /// client killed while connecting, a probe): no application data, so nothing unaudited.
    package var tlsAbandoned = 0
    package var tlsRecords = 0
    package var tlsPlaintextBytes: Int64 = 0
    /// UDP datagrams decoded.
    package var udpDatagrams = 0
    /// With a key log: UDP flows that began with a QUIC client's Initial, the QUIC packets opened, those that could not
    /// be (no keys, or not under the keys), and the first few reasons why.
    package var quicConnections = 0
    package var quicPacketsOpened = 0
    package var quicPacketsUnopened = 0
    package var quicProblems: [String] = []
    /// What the QUIC connections' paths did (changes, migrations, the stall).
    package var quicPaths = QUICPathSummary()

    /// Empty statistics.
    package init() {}
}
