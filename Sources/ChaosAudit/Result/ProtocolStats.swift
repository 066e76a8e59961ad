/// What the protocol layer saw besides messages: WebSocket handshakes, close codes, heartbeats, oversized
/// messages and bytes that did not parse. All zero for lines and length-prefixed framing.
public struct ProtocolStats: Sendable, Codable, Equatable {
    /// Upgrade handshakes accepted (101 Switching Protocols read from the server). Every figure here counts what
    /// the peers sent, as the proxy read it.
    public var upgrades: Int64 = 0
    /// Upgrade requests answered with another status.
    public var upgradeFailures: Int64 = 0
    /// Close frames sent, by code (`1000`, `1012`; `none` for a close frame without a code),
    /// and `1006` for each connection that ended with no close frame either way after its upgrade.
    public var closeCodes: [String: Int64] = [:]
    /// The same, by the fault active (or last) when the close came (`none` before any fault).
    public var closeCodesByFault: [String: [String: Int64]] = [:]
    /// Connections that ended with no close frame either way after their upgrade (1006, abnormal closure).
    public var abnormalClosures: Int64 = 0
    /// Ping frames sent (heartbeats).
    public var pings: Int64 = 0
    /// Pong frames sent.
    public var pongs: Int64 = 0
    /// Messages larger than `max_message`: counted, not audited.
    public var oversized: Int64 = 0
    /// Connection directions whose bytes did not parse (`protocol` anomalies).
    public var protocolErrors: Int64 = 0

    /// All zero.
    public init() {}

    /// Whether nothing was seen.
    public var isEmpty: Bool { self == ProtocolStats() }

    mutating func close(code: String, fault: String) {
        closeCodes[code, default: 0] += 1
        closeCodesByFault[fault, default: [:]][code, default: 0] += 1
    }
}
