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
        ProtocolCounter("sioUnauditedEvents", "EVENTs outside `events:` or `namespaces:`"),
    ]
    package static let counterFamilies = [
        ProtocolCounter("eioRefusals", "polling answers other than 200", note: "400: a session id the server does not know (a restarted server)")
    ]

    /// The stream-key prefix that names a key of the CONNECT packet's auth.
    package static let authPrefix = "auth:"

    /// `events: [tick, chat]`: the event names whose EVENTs are messages, and `namespaces: [/, /chat]`: the
    /// namespaces whose EVENTs are (default every one); the others are counted (`sioUnauditedEvents`), not audited.
    package static var listOptionKeys: [String] { [eventsKey, namespacesKey] }
    static let eventsKey = "events"
    static let namespacesKey = "namespaces"

    package static func listOptionProblem(_ key: String, _ item: String) -> String? {
        switch key {
        case namespacesKey where !item.hasPrefix("/"): "is not a namespace: a namespace begins with '/' ('/' is the main one)"
        case eventsKey where item.isEmpty: "is not an event name"
        default: nil
        }
    }

    /// The proxy follows Engine.IO's HTTP messages and, after an upgrade, its WebSocket frames, for the faults below.
    package static var frames: String? { "socketio" }

    /// Engine.IO's own faults: on connections that still carry long polling (one already upgraded to a WebSocket is
    /// not reached), `eio-session-unknown`, the answer a restarted server gives a session it does not know, and
    /// `eio-poll-hang`, a polling request never answered; and, while it lasts, `eio-upgrade-hang`, an upgrade to a
    /// WebSocket never answered (a proxy on the path that does not pass WebSockets, a probe lost).
    package static let faults = [
        ProtocolFaultDeclaration(
            kind: "eio-session-unknown",
            summary:
                "a long-polling request answered HTTP 400 \"Session ID unknown\" (a restarted server's answer): the one awaiting its answer, or on a connection with none outstanding the client's next (never an answer unasked), then the connection closed; the sessions it struck stay unknown: a later request naming one, on any connection, gets the same",
            fields: [.init("grace", .duration(default: .seconds(Int64(1))))]
        ),
        ProtocolFaultDeclaration(
            kind: "eio-upgrade-hang",
            summary:
                "while it lasts, an upgrade from long polling to a WebSocket gets no answer (nothing reaches the client on that connection: neither the 101 nor the probe's answer), then the connection closed after the hold",
            fields: [.init("hold", .duration(default: .seconds(Int64(10))))],
            lasting: true
        ),
        ProtocolFaultDeclaration(
            kind: "eio-poll-hang",
            summary:
                "long-polling requests left unanswered (nothing reaches the client after the answer under way), then the connection closed after the hold",
            fields: [.init("hold", .duration(default: .seconds(Int64(30))))]
        ),
    ]

    package static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking { EngineIOBoundaryTracker() }

    /// `eio-session-unknown`: the 400 answer toward the client at its next answer boundary, nothing more either way;
    /// `eio-poll-hang`: nothing more toward the client once an answer ends (its requests still reach the server), for
    /// the hold. A connection upgraded to a WebSocket (or whose HTTP the proxy lost track of) gets neither.
    package static func faultFrames(_ fault: ProtocolFault, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames? {
        if fault.kind == "eio-upgrade-hang" {
            // Caught as its upgrade was asked for: nothing more reaches the client (the server's answer is to come).
            guard (client as? EngineIOBoundaryTracker)?.upgradesASession == true, let hold = fault.duration("hold") else { return nil }
            return FaultFrames(toServer: nil, toClient: .init(frame: [], silenceAfter: true), grace: hold)
        }
        guard (client as? EngineIOBoundaryTracker)?.isPolling == true else { return nil }
        switch fault.kind {
        case "eio-session-unknown":
            guard let grace = fault.duration("grace") else { return nil }
            return FaultFrames(
                toServer: .init(frame: [], silenceAfter: true),
                toClient: .init(frame: sessionUnknownAnswer, silenceAfter: true, answersARequest: true),
                grace: grace
            )
        case "eio-poll-hang":
            guard let hold = fault.duration("hold") else { return nil }
            return FaultFrames(toServer: nil, toClient: .init(frame: [], silenceAfter: true), grace: hold)
        default:
            return nil
        }
    }

    /// `eio-upgrade-hang` catches a connection once its client has asked to upgrade a session to a WebSocket and the
    /// server has not answered yet (a WebSocket already up is not caught); the sessions `eio-session-unknown` made the
    /// server forget (``lingering(_:struck:)``) catch a polling connection whose client names one of them.
    package static func catches(_ fault: ProtocolFault, client: any FrameBoundaryTracking, server: any FrameBoundaryTracking) -> Bool {
        guard let client = client as? EngineIOBoundaryTracker else { return false }
        switch fault.kind {
        case "eio-upgrade-hang":
            return client.upgradesASession && (server as? EngineIOBoundaryTracker)?.isPolling == true
        case "eio-session-unknown":
            guard client.isPolling, let session = client.session, let forgotten = fault.text(forgottenKey) else { return false }
            return forgotten.split(separator: " ").contains { $0 == session }
        default:
            return false
        }
    }

    /// Whether the client's latest request awaits its answer: it has written more requests than the server has begun
    /// answers (HTTP/1.1 answers in order; a polling client does not pipeline).
    package static func awaitsAnswer(client: any FrameBoundaryTracking, server: any FrameBoundaryTracking) -> Bool {
        guard let client = client as? EngineIOBoundaryTracker, let server = server as? EngineIOBoundaryTracker else { return true }
        return client.heads > server.heads
    }

    /// The field of a lingering `eio-session-unknown` that lists the sessions forgotten (space-separated).
    static let forgottenKey = "forgotten"

    /// `eio-session-unknown` is a restarted server's answer: the sessions it struck stay unknown, so a later request that
    /// names one of them, on a connection the strike did not reach (a client's next long-poll on a new connection), gets
    /// the same answer. The sessions are those the struck connections' clients last named.
    package static func lingering(_ fault: ProtocolFault, struck: [any FrameBoundaryTracking]) -> ProtocolFault? {
        guard fault.kind == "eio-session-unknown" else { return nil }
        let sessions = Set(struck.compactMap { ($0 as? EngineIOBoundaryTracker)?.session })
        guard !sessions.isEmpty else { return nil }
        return ProtocolFault(kind: fault.kind, fields: fault.fields + [.init(forgottenKey, .text(sessions.sorted().joined(separator: " ")))])
    }

    /// What the engine.io server answers a request for a session it does not know (after a restart): 400, with the
    /// reference server's JSON body, closing the connection.
    package static let sessionUnknownAnswer: [UInt8] = {
        let body = #"{"code":1,"message":"Session ID unknown"}"#
        let head = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        return Array((head + body).utf8)
    }()

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        SocketIOFramer(
            sessions: SocketIOSessions(),
            firstArgument: readsFirstArgumentOnly(spec),
            audited: SocketIOEventFilter(events: spec.lists?[eventsKey], namespaces: spec.lists?[namespacesKey])
        )
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

    /// The paths read in the event's array; when every one lies in its first argument (`1.seq`, a bare `KEY`; no
    /// event name), read in that argument itself, which the decoder then hands over in place (no object of the array
    /// built, a flat key scanned).
    package static func fieldSpec(_ spec: ProtocolSpec) -> ProtocolSpec {
        let indexed = spec.rewritingPaths(arrayPath)
        guard readsFirstArgumentOnly(spec) else { return indexed }
        return indexed.rewritingPaths { path in
            guard path.hasPrefix("/1/") else { return path }
            let inner = path.dropFirst(3)
            return inner.contains("/") ? "/" + inner : String(inner)
        }
    }

    /// Whether every path the audit reads lies in the event's first argument, or in the handshake (`query:`,
    /// `header:`, `auth:`).
    static func readsFirstArgumentOnly(_ spec: ProtocolSpec) -> Bool {
        let indexed = spec.rewritingPaths(arrayPath)
        var paths = [indexed.seq] + [indexed.stream, indexed.id, indexed.ack, indexed.fanout?.resume].compactMap { $0 } + Array(indexed.ignore.keys)
        for override in [indexed.upstream, indexed.downstream].compactMap({ $0 }) {
            paths += [override.seq, override.stream, override.ack].compactMap { $0 } + (override.ignore.map { Array($0.keys) } ?? [])
        }
        return paths.allSatisfy { path in
            (path.hasPrefix("/1/") && path.count > 3) || path.hasPrefix("header:") || streamKeyPrefixes.contains { path.hasPrefix($0) }
        }
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

/// A new ``SocketIOSession`` per connection, all of them meeting in one ``SocketIOSessions``; `firstArgument`: an
/// event's message is its first argument (``SocketIOProtocol/readsFirstArgumentOnly(_:)``); `audited`: the events
/// that are messages.
struct SocketIOFramer: ProtocolFramer {
    let sessions: SocketIOSessions
    let firstArgument: Bool
    let audited: SocketIOEventFilter

    func makeSession() -> any ProtocolSession {
        SocketIOSession(sessions: sessions, firstArgument: firstArgument, audited: audited)
    }

    /// An upgraded connection's relayed frames are decoded once for both copies (its faults' own answers end that).
    var auditsRelayedReadsOnce: Bool { true }
}

extension ProtocolSpec.Framing {
    /// `framing: socketio`.
    package static let socketio = Self(name: SocketIOProtocol.name)
}
