package import ChaosCore

/// `framing: socketio`: Socket.IO v5 over Engine.IO v4, on HTTP long-polling and on WebSocket, followed across the
/// upgrade (``SocketIODecoder``). One message is one EVENT (or BINARY_EVENT): its JSON array `[name, arg1, …]`, handed
/// over keyed by index (`{"0":name,"1":arg1,…}`) and read by paths into it: `1.seq` is the key `seq` of the first argument, `0` (or `event`, or the default `type`) the
/// event's name, a bare `KEY` the first argument's key, a `/pointer` into the array. The stream may also come from
/// the client's session: `query:NAME` / `header:NAME` of its requests (the handshake's, for the connections after it)
/// and `auth:KEY` of its CONNECT packet. Engine.IO's ping and pong are the keepalive; opens, probes, upgrades,
/// closes, long-polling requests, CONNECTs (those resuming a session with `pid`/`offset`: `sioRecoveries`),
/// DISCONNECTs, CONNECT_ERRORs and ACKs are counted, and answers other than 200 to a polling request by status
/// (`eioRefusals`: a restarted server's 400 "Session ID unknown").
package enum SocketIOProtocol: ProtocolPlugin {
    package static let names = ["socketio"]
    package static let carriesBinary = false
    /// `header:NAME` and `query:NAME` of the client's requests.
    package static let streamKeyPrefixes = ["header:", "query:"]

    package static let counters = [
        ProtocolCounter("eioPolls", "long-polling requests"), ProtocolCounter("eioOpens", "Engine.IO sessions opened"),
        ProtocolCounter("eioProbes", "upgrade probes"), ProtocolCounter("eioUpgrades", "upgrades to WebSocket"),
        ProtocolCounter("eioCloses", "Engine.IO closes"), ProtocolCounter("sioConnects", "Socket.IO CONNECTs"),
        ProtocolCounter("sioRecoveries", "CONNECTs resuming a session (pid, offset)"),
        ProtocolCounter("sioDisconnects", "Socket.IO DISCONNECTs"), ProtocolCounter("sioConnectErrors", "CONNECT_ERRORs"),
        ProtocolCounter("sioAcks", "Socket.IO ACKs"),
    ]
    package static let counterFamilies = [
        ProtocolCounter("eioRefusals", "polling answers other than 200", note: "400: a session id the server does not know (a restarted server)")
    ]

    /// The stream-key prefix that names a key of the CONNECT packet's auth.
    package static let authPrefix = "auth:"

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        SocketIOFramer(sessions: SocketIOSessions())
    }

    /// A path as a scenario writes it, as the audit reads the event's array: `1.seq` → `/1/seq`, `0` → `/0`, `event`
    /// and `type` → `/0`, a bare `KEY` → `/1/KEY`; a `/pointer`, `header:` and `query:` unchanged; `auth:KEY` read from
    /// the session (as a `header:`).
    static func arrayPath(_ path: String) -> String {
        if path.hasPrefix(authPrefix) { return "header:" + path }
        if path.hasPrefix("/") || streamKeyPrefixes.contains(where: { path.hasPrefix($0) }) { return path }
        if path == "event" || path == "type" { return "/0" }
        let parts = path.split(separator: ".", omittingEmptySubsequences: false)
        if let first = parts.first, !first.isEmpty, first.allSatisfy(\.isNumber) { return "/" + parts.joined(separator: "/") }
        return "/1/" + parts.joined(separator: "/")
    }

    package static func fieldSpec(_ spec: ProtocolSpec) -> ProtocolSpec {
        spec.rewritingPaths(arrayPath)
    }

    /// Packets in the answer to a long-polling GET of a session whose stream is in the query.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        let request = Array("GET /socket.io/?EIO=4&transport=polling&stream=c1 HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        let response = Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".utf8)
        return FuzzSetup(
            spec: ProtocolSpec(framing: .socketio, seq: "1.seq", stream: "query:stream", maxMessage: 4096),
            prelude: [.read(.client, request), .written(.server, request), .read(.server, response), .written(.client, response)],
            input: input
        )
    }
}

/// A new ``SocketIOSession`` per connection, all of them meeting in one ``SocketIOSessions``.
struct SocketIOFramer: ProtocolFramer {
    let sessions: SocketIOSessions

    func makeSession() -> any ProtocolSession { SocketIOSession(sessions: sessions) }
}

extension ProtocolSpec.Framing {
    /// `framing: socketio`.
    package static let socketio = Self(name: SocketIOProtocol.name)
}
