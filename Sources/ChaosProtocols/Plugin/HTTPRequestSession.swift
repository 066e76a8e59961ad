/// A session whose stream is opened by an HTTP request (an SSE connection, an HTTP/3 request stream): the request's
/// target and headers, recorded by the first leg that reads it, are what `stream: header:NAME` and `query:NAME` read.
protocol HTTPRequestSession: ProtocolSession {
    /// The request's record (the request half of a WebSocket handshake's).
    var request: WebSocketSession { get }
}

extension HTTPRequestSession {
    /// Records the request (the first leg to read it wins: the others saw the same bytes).
    func requested(target: String, headers: [(name: String, value: String)]) {
        request.requested(target: target, headers: headers)
    }

    func requestHeader(_ name: String) -> String? { request.header(name) }
    func requestQuery(_ name: String) -> String? { request.query(name) }
}
