/// One leg of an SSE connection: HTTP/1.1 messages in turn, a head up to its blank line then its body. Upstream,
/// requests: the first one's target and headers go to the session (for `stream: query:` / `header:`), and one
/// with `Last-Event-ID` is a resume. Downstream, responses: the body of a `200` with `Content-Type:
/// text/event-stream` is read as events (each complete one a message, at the wire position of the line end of
/// its blank line); any other body is skipped. Bodies may be chunked.
///
/// Memory is bounded: a head up to ``headLimit`` bytes, events as ``SSEEventParser`` keeps them. Bytes that are not
/// HTTP/1.1 stop the decoder with a problem; the rest of the leg is ignored.
final class SSEDecoder: LegDecoder {
    /// The longest head (request or status line plus headers) read.
    static let headLimit = 16 * 1024

    enum Phase: Equatable { case head, body, stopped }

    /// Client → server: the leg carries requests.
    let upstream: Bool
    let session: SSESession
    let cap: Int
    private(set) var phase = Phase.head
    private var head: [UInt8] = []
    private var headEnd = HTTPHeadMatcher()
    private var body = HTTPBodyReader(.done)
    /// The events of the current response body; nil when the body is skipped.
    private(set) var events: SSEEventParser?

    /// A decoder for the `upstream` (client → server) or downstream leg, sharing `session` with the connection's
    /// other legs; events with over `cap` bytes of data are counted, not kept.
    init(upstream: Bool, session: SSESession, cap: Int) {
        self.upstream = upstream
        self.session = session
        self.cap = cap
    }

    var hasPartialMessage: Bool { phase == .body && events?.hasPartialEvent == true }

    /// The bytes the decoder holds in its buffers (what a test checks stays bounded).
    var bufferedCapacity: Int { head.capacity + (events?.bufferedCapacity ?? 0) }

    func dropPartial() { events?.dropPartial() }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        var position = 0
        while position < input.count, phase != .stopped {
            position = phase == .head ? readHead(input, from: position, output) : readBody(input, from: position, output)
        }
    }

    private func readBody(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        let (next, found) = body.step(input, from: start)
        switch found {
        case .content(let range)?:
            events?.feed(input, range) { event in
                switch event {
                case .event(let data, let end): output(.message(data, end: end, binary: false))
                case .oversized(let bytes, let end): output(.event(.oversized(bytes: bytes, end: end), at: end))
                case .retry(_, let end): output(.event(.counted("sseRetries"), at: end))
                }
            }
        case .ended?: bodyEnded()
        case .problem(let reason, let at)?: stop(reason, at: at, output)
        case nil: break
        }
        if phase == .body, body.state == .done { bodyEnded() }
        return phase == .stopped ? input.count : next
    }

    private func bodyEnded() {
        phase = .head
        events = nil
    }

    /// Reads a head up to its blank line (line ends some clients put between requests skipped); returns where
    /// its body starts.
    private func readHead(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        var first = start
        while head.isEmpty, first < input.count, input[first] == 13 || input[first] == 10 { first += 1 }
        let last = min(input.count, first + Self.headLimit + 1 - head.count)
        var position = first
        var ended = false
        while position < last, !ended {
            ended = headEnd.ends(with: input[position])
            position += 1
        }
        head.append(contentsOf: input[first..<position])
        guard ended else {
            if head.count > Self.headLimit { stop("no end of the HTTP headers within \(Self.headLimit) bytes", at: position, output) }
            return phase == .stopped ? input.count : position
        }
        let text = head
        head = []
        headEnded(HTTPHead(text), at: position, output)
        return phase == .stopped ? input.count : position
    }

    private func headEnded(_ head: HTTPHead, at end: Int, _ output: (DecoderOutput) -> Void) {
        let parts = head.startLine.split(separator: " ", maxSplits: 2).map(String.init)
        if upstream {
            guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else {
                return stop("not an HTTP/1.1 request: \(head.startLine.prefix(80))", at: end, output)
            }
            session.requested(target: parts[1], headers: head.headers)
            output(.event(.requestRead, at: end))
            if head.header("last-event-id") != nil { output(.event(.counted("sseResumes"), at: end)) }
            startBody(head, events: false, end: end, output)
        } else {
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...599).contains(status) else {
                return stop("not an HTTP/1.1 status line: \(head.startLine.prefix(80))", at: end, output)
            }
            if (100...199).contains(status) { return }  // an interim answer: the real one follows
            let eventStream =
                status == 200
                && head.header("content-type")?.lowercased().hasPrefix("text/event-stream") == true
            session.answered(eventStream: eventStream)
            output(.event(.counted(eventStream ? "sseStreams" : "sseRefused"), at: end))
            if status == 204 || status == 304 { return }
            startBody(head, events: eventStream, end: end, output)
        }
    }

    /// Reads the body the head frames: chunked, `Content-Length`, or (a response with neither) up to the close.
    private func startBody(_ head: HTTPHead, events readEvents: Bool, end: Int, _ output: (DecoderOutput) -> Void) {
        guard let framed = HTTPBodyReader.framing(of: head, request: upstream) else {
            return stop("a Content-Length that is not a number: \(head.header("content-length")?.prefix(40) ?? "")", at: end, output)
        }
        body = framed
        guard body.state != .done else { return }
        phase = .body
        events = readEvents ? SSEEventParser(cap: cap, wholeEvent: session.wholeEvent, envelope: session.envelope) : nil
    }

    private func stop(_ reason: String, at position: Int, _ output: (DecoderOutput) -> Void) {
        phase = .stopped
        head = []
        events = nil
        output(.problem(.protocolError(reason), at: position))
    }
}

/// An HTTP/1.1 head read up to its blank line: the start line and the headers (names lowercased, values trimmed).
struct HTTPHead {
    var startLine = ""
    var headers: [(name: String, value: String)] = []

    /// Reads `bytes` (a head including its CRLF CRLF); a header line without a colon is skipped.
    init(_ bytes: [UInt8]) {
        var lines = bytes.split(separator: 10).map { line in
            String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self)
        }.filter { !$0.isEmpty }.makeIterator()
        startLine = lines.next() ?? ""
        while let line = lines.next() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((line[..<colon].trimmingSpaces.lowercased(), line[line.index(after: colon)...].trimmingSpaces))
        }
    }

    /// The value of the first header named `name` (lowercase).
    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}
