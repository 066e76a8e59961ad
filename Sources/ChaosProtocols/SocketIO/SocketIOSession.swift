import ChaosCore

/// What the legs of one TCP connection of a Socket.IO client share: the request read last (a long-polling
/// connection carries one request after another; an upgraded one, its upgrade request), the Engine.IO session it
/// belongs to (`sid` in its query, or the one its open packet gave), and the WebSocket handshake of an upgraded
/// connection. Stream keys the connection's own request lacks come from its Engine.IO session (``SocketIOSessions``):
/// the handshake request's query and headers, the CONNECT packet's auth.
final class SocketIOSession: ProtocolSession {
    let sessions: SocketIOSessions
    /// The WebSocket handshake, shared by the decoders of an upgraded connection.
    let webSocket = WebSocketSession()
    /// The request read last (its target and headers).
    private(set) var request = WebSocketSession()
    /// The Engine.IO session id.
    private(set) var sid: String?
    /// This connection's CONNECT auth, when it carried the CONNECT.
    private(set) var auth: [String: String]?

    /// Whether an event's message is its first argument, handed over in place (else the array as an object by index).
    let firstArgument: Bool
    /// The events that are messages (`events:`, `namespaces:`).
    let audited: SocketIOEventFilter

    init(sessions: SocketIOSessions, firstArgument: Bool = false, audited: SocketIOEventFilter = SocketIOEventFilter()) {
        self.sessions = sessions
        self.firstArgument = firstArgument
        self.audited = audited
    }

    /// A request was read (each leg that reads it calls this; the same request twice changes nothing).
    func requested(target: String, headers: [(name: String, value: String)]) {
        guard request.target != target || request.headers.count != headers.count else { return }
        let next = WebSocketSession()
        next.requested(target: target, headers: headers)
        request = next
        if let sid = next.query("sid") { self.sid = sid }
    }

    /// An open packet gave the session its id: the request that opened it is the session's handshake.
    func opened(sid: String) {
        guard self.sid != sid else { return }
        self.sid = sid
        sessions.opened(sid, target: request.target ?? "", headers: request.headers)
    }

    /// A CONNECT packet's auth (its top-level scalars).
    func connected(auth: [String: String]) {
        self.auth = auth
        if let sid { sessions.connected(sid, auth: auth) }
    }

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        SocketIODecoder(upstream: direction == .upstream, session: self, cap: cap)
    }

    /// `header:NAME` of the request, else of the session's handshake; `auth:KEY` (as ``SocketIOProtocol`` rewrites a
    /// stream key `auth:KEY`) of the CONNECT packet's auth.
    func requestHeader(_ name: String) -> String? {
        if name.hasPrefix(SocketIOProtocol.authPrefix) {
            let key = String(name.dropFirst(SocketIOProtocol.authPrefix.count))
            return auth?[key] ?? sid.flatMap { sessions.entry($0)?.auth[key] }
        }
        if let value = request.header(name) { return value }
        guard let sid, let entry = sessions.entry(sid) else { return nil }
        let lowered = name.lowercased()
        return entry.headers.first { $0.name == lowered }?.value
    }

    /// `query:NAME` of the request, else of the session's handshake.
    func requestQuery(_ name: String) -> String? {
        if let value = request.query(name) { return value }
        guard let sid, let entry = sessions.entry(sid) else { return nil }
        let handshake = WebSocketSession()
        handshake.requested(target: entry.target, headers: [])
        return handshake.query(name)
    }
}
