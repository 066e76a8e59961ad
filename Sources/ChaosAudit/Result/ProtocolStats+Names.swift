/// The counters report.json has always had, by name, for Swift readers of a result (the tests, the renderers'
/// callers); the audit itself counts through ``ProtocolStats/subscript(counter:)`` and
/// ``ProtocolStats/count(_:code:fault:)``, and a plug-in's families of codes are read by their names
/// (``ProtocolStats/subscript(family:)``).
extension ProtocolStats {
    /// Upgrade handshakes accepted (101 Switching Protocols read from the server).
    package var upgrades: Int64 {
        get { self[counter: "upgrades"] }
        set { self[counter: "upgrades"] = newValue }
    }
    /// Upgrade requests answered with another status.
    package var upgradeFailures: Int64 {
        get { self[counter: "upgradeFailures"] }
        set { self[counter: "upgradeFailures"] = newValue }
    }
    /// Connections that ended with no close frame either way after their upgrade (an abnormal closure).
    package var abnormalClosures: Int64 {
        get { self[counter: "abnormalClosures"] }
        set { self[counter: "abnormalClosures"] = newValue }
    }
    /// Heartbeats: the protocols' ping frames.
    package var pings: Int64 {
        get { self[counter: "pings"] }
        set { self[counter: "pings"] = newValue }
    }
    /// Their answers: pongs, ping acknowledgements.
    package var pongs: Int64 {
        get { self[counter: "pongs"] }
        set { self[counter: "pongs"] = newValue }
    }
    /// Calls started (an RPC's request headers read from the client).
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

}
