package import ChaosCore

/// What a plug-in gives the audit for one protocol spec: a new session for each connection.
package protocol ProtocolFramer: Sendable {
    /// The session of a new connection.
    func makeSession() -> any ProtocolSession
    /// Whether the proxy never writes bytes of its own in this protocol before a message it relays (no frames of its
    /// faults, such as a GOAWAY, or only one that is the last thing written on its leg, such as MQTT's DISCONNECT):
    /// what it writes to a consumer is then, message by message, what it read from the producer at the same offsets,
    /// and the audit reads each message's fields once. False by default.
    var proxyWritesOnlyRelayedBytes: Bool { get }
    /// Whether a read the proxy writes whole (the write of the read's own buffer, at the same offset) is decoded once
    /// for both its copies while both legs' decoders can hand their state over (``LegDecoder/canHandOverState``):
    /// the audit holds each read until the next event to see. Safe whatever the proxy writes of its own (such a write
    /// is never a read's buffer: the lockstep ends there, and the written copy's decoder takes the read copy's state);
    /// true where ``proxyWritesOnlyRelayedBytes`` is, else false by default.
    var auditsRelayedReadsOnce: Bool { get }
}

extension ProtocolFramer {
    package var proxyWritesOnlyRelayedBytes: Bool { false }
    package var auditsRelayedReadsOnce: Bool { proxyWritesOnlyRelayedBytes }
}

/// What the legs of one connection share (what its handshake decided, the calls opened on it), and the maker of
/// their decoders: one per leg (read from / written to, upstream / downstream), each fed that leg's bytes.
package protocol ProtocolSession: AnyObject {
    /// The decoder of one leg carrying `direction`'s bytes; messages over `cap` bytes are counted, not kept.
    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder
    /// The value of the request header `name` of the connection's handshake (case-insensitive), if it had one
    /// (`stream: header:NAME`).
    func requestHeader(_ name: String) -> String?
    /// The value of the query parameter `name` of the handshake's request target, if any (`stream: query:NAME`).
    func requestQuery(_ name: String) -> String?
    /// The events the connection's end means, once both its legs closed (WebSocket: no close frame after an
    /// accepted upgrade is 1006); `readCount` gives how many codes of a family were read on it.
    func ended(readCount: (String) -> Int) -> [ProtocolEvent]
    /// The connection's TLS handshake chose `alpn` (nil: none): told before its first byte, when the bytes come from
    /// a decrypted capture. `framing: auto` picks its protocol by it.
    func negotiated(alpn: String?)
    /// Who receives the messages this connection carries downstream, when a server fans one stream out to several
    /// receivers (an MQTT subscriber's client id): each receiver's copy of a stream is then a stream of its own, so
    /// that one message delivered to two subscribers is two deliveries, not a duplicate. nil (the default): every
    /// connection's downstream messages of a stream are one stream.
    var receiver: String? { get }
}

extension ProtocolSession {
    package func requestHeader(_ name: String) -> String? { nil }
    package func requestQuery(_ name: String) -> String? { nil }
    package func ended(readCount: (String) -> Int) -> [ProtocolEvent] { [] }
    package func negotiated(alpn: String?) {}
    package var receiver: String? { nil }
}
