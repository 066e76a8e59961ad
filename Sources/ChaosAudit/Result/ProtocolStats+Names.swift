/// The counters and families report.json has always had, by name, for Swift readers of a result (the tests, the
/// renderers' callers); the audit itself counts through ``ProtocolStats/subscript(counter:)`` and ``ProtocolStats/count(_:code:fault:)``.
extension ProtocolStats {
    /// Upgrade handshakes accepted (101 Switching Protocols read from the server, WebSocket or h2c).
    package var upgrades: Int64 {
        get { self[counter: "upgrades"] }
        set { self[counter: "upgrades"] = newValue }
    }
    /// Upgrade requests answered with another status.
    package var upgradeFailures: Int64 {
        get { self[counter: "upgradeFailures"] }
        set { self[counter: "upgradeFailures"] = newValue }
    }
    /// Connections that ended with no close frame either way after their upgrade (1006, abnormal closure).
    package var abnormalClosures: Int64 {
        get { self[counter: "abnormalClosures"] }
        set { self[counter: "abnormalClosures"] = newValue }
    }
    /// Heartbeats: WebSocket ping frames, HTTP/2 PING frames.
    package var pings: Int64 {
        get { self[counter: "pings"] }
        set { self[counter: "pings"] = newValue }
    }
    /// Their answers: WebSocket pong frames, HTTP/2 PING acks.
    package var pongs: Int64 {
        get { self[counter: "pongs"] }
        set { self[counter: "pongs"] = newValue }
    }
    /// gRPC calls started (request headers read from the client).
    package var calls: Int64 {
        get { self[counter: "calls"] }
        set { self[counter: "calls"] = newValue }
    }
    /// Messages larger than `max_message`: counted, not audited.
    package var oversized: Int64 {
        get { self[counter: "oversized"] }
        set { self[counter: "oversized"] = newValue }
    }
    /// TLS handshakes that failed (`tls` anomalies): clients that rejected chaos's certificate, upstreams that failed.
    package var tlsFailures: Int64 {
        get { self[counter: "tlsFailures"] }
        set { self[counter: "tlsFailures"] = newValue }
    }
    /// Connection directions whose bytes did not parse (`protocol` anomalies).
    package var protocolErrors: Int64 {
        get { self[counter: "protocolErrors"] }
        set { self[counter: "protocolErrors"] = newValue }
    }

    /// Close frames by code (`1000`, `1012`; `none` without a code), and `1006` per connection ended without one.
    package var closeCodes: [String: Int64] {
        get { self[family: "closeCodes"] }
        set { self[family: "closeCodes"] = newValue }
    }
    package var closeCodesByFault: [String: [String: Int64]] {
        get { self[familyByFault: "closeCodes"] }
        set { self[familyByFault: "closeCodes"] = newValue }
    }
    /// HTTP/2 GOAWAY frames by error code name (a peer's as read, the proxy's own as written).
    package var goaways: [String: Int64] {
        get { self[family: "goaways"] }
        set { self[family: "goaways"] = newValue }
    }
    package var goawaysByFault: [String: [String: Int64]] {
        get { self[familyByFault: "goaways"] }
        set { self[familyByFault: "goaways"] = newValue }
    }
    /// HTTP/2 RST_STREAM frames by error code name.
    package var streamResets: [String: Int64] {
        get { self[family: "streamResets"] }
        set { self[family: "streamResets"] = newValue }
    }
    package var streamResetsByFault: [String: [String: Int64]] {
        get { self[familyByFault: "streamResets"] }
        set { self[familyByFault: "streamResets"] = newValue }
    }
    /// gRPC calls ended with a status in trailers, by status name.
    package var grpcStatuses: [String: Int64] {
        get { self[family: "grpcStatuses"] }
        set { self[family: "grpcStatuses"] = newValue }
    }
    package var grpcStatusesByFault: [String: [String: Int64]] {
        get { self[familyByFault: "grpcStatuses"] }
        set { self[familyByFault: "grpcStatuses"] = newValue }
    }
}
