/// What the protocol layer saw besides messages: WebSocket handshakes and close codes, HTTP/2 GOAWAY and
/// RST_STREAM frames, gRPC statuses, heartbeats, oversized messages and bytes that did not parse. All zero for
/// lines and length-prefixed framing. Every figure counts what the peers sent, as the proxy read it (and the
/// GOAWAY frames the proxy sent itself).
public struct ProtocolStats: Sendable, Codable, Equatable {
    /// Upgrade handshakes accepted (101 Switching Protocols read from the server, WebSocket or h2c).
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
    /// Heartbeats: WebSocket ping frames, HTTP/2 PING frames.
    public var pings: Int64 = 0
    /// Their answers: WebSocket pong frames, HTTP/2 PING acks.
    public var pongs: Int64 = 0
    /// HTTP/2 PING round trips (a keepalive read from one peer to its ack read from the other), through the proxy and
    /// the answering peer; nil when there were none.
    public var pingRoundTripS: LatencySummary?
    /// gRPC calls started (request headers read from the client).
    public var calls: Int64 = 0
    /// HTTP/2 GOAWAY frames, a peer's (as read) or the proxy's own from a `goaway` fault (as written), by error code
    /// name (`NO_ERROR`, `ENHANCE_YOUR_CALM`, …).
    public var goaways: [String: Int64] = [:]
    /// The same, by the fault active (or last) when it came (`none` before any fault).
    public var goawaysByFault: [String: [String: Int64]] = [:]
    /// HTTP/2 RST_STREAM frames, by error code name (`CANCEL`, `REFUSED_STREAM`, …).
    public var streamResets: [String: Int64] = [:]
    /// The same, by fault.
    public var streamResetsByFault: [String: [String: Int64]] = [:]
    /// gRPC calls ended with a status in trailers, by status name (`OK`, `UNAVAILABLE`, `DEADLINE_EXCEEDED`, …).
    public var grpcStatuses: [String: Int64] = [:]
    /// The same, by fault.
    public var grpcStatusesByFault: [String: [String: Int64]] = [:]
    /// Messages larger than `max_message`: counted, not audited.
    public var oversized: Int64 = 0
    /// Connection directions whose bytes did not parse (`protocol` anomalies).
    public var protocolErrors: Int64 = 0

    /// All zero.
    public init() {}

    /// Whether nothing was seen.
    public var isEmpty: Bool { self == ProtocolStats() }

    private enum CodingKeys: String, CodingKey {
        case upgrades, upgradeFailures, closeCodes, closeCodesByFault, abnormalClosures, pings, pongs, pingRoundTripS, calls, goaways,
             goawaysByFault, streamResets, streamResetsByFault, grpcStatuses, grpcStatusesByFault, oversized, protocolErrors
    }

    /// Decodes the figures; those a report written before they existed lacks are zero.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func count(_ key: CodingKeys) throws -> Int64 { try c.decodeIfPresent(Int64.self, forKey: key) ?? 0 }
        func codes(_ key: CodingKeys) throws -> [String: Int64] { try c.decodeIfPresent([String: Int64].self, forKey: key) ?? [:] }
        func byFault(_ key: CodingKeys) throws -> [String: [String: Int64]] {
            try c.decodeIfPresent([String: [String: Int64]].self, forKey: key) ?? [:]
        }
        upgrades = try count(.upgrades)
        upgradeFailures = try count(.upgradeFailures)
        closeCodes = try codes(.closeCodes)
        closeCodesByFault = try byFault(.closeCodesByFault)
        abnormalClosures = try count(.abnormalClosures)
        pings = try count(.pings)
        pongs = try count(.pongs)
        pingRoundTripS = try c.decodeIfPresent(LatencySummary.self, forKey: .pingRoundTripS)
        calls = try count(.calls)
        goaways = try codes(.goaways)
        goawaysByFault = try byFault(.goawaysByFault)
        streamResets = try codes(.streamResets)
        streamResetsByFault = try byFault(.streamResetsByFault)
        grpcStatuses = try codes(.grpcStatuses)
        grpcStatusesByFault = try byFault(.grpcStatusesByFault)
        oversized = try count(.oversized)
        protocolErrors = try count(.protocolErrors)
    }

    mutating func close(code: String, fault: String) {
        Self.count(code, fault: fault, in: &closeCodes, &closeCodesByFault)
    }

    mutating func goaway(code: String, fault: String) { Self.count(code, fault: fault, in: &goaways, &goawaysByFault) }

    mutating func streamReset(code: String, fault: String) {
        Self.count(code, fault: fault, in: &streamResets, &streamResetsByFault)
    }

    mutating func grpcStatus(code: String, fault: String) {
        Self.count(code, fault: fault, in: &grpcStatuses, &grpcStatusesByFault)
    }

    private static func count(_ code: String, fault: String, in total: inout [String: Int64],
                              _ byFault: inout [String: [String: Int64]]) {
        total[code, default: 0] += 1
        byFault[fault, default: [:]][code, default: 0] += 1
    }
}
