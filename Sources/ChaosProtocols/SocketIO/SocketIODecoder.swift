/// One leg of a TCP connection of a Socket.IO client (Engine.IO v4): HTTP/1.1 messages in turn (long polling: a GET
/// that the server answers with packets, a POST that carries the client's), or, once a request asks for it, a
/// WebSocket whose text messages are packets. A long-polling body is a payload of Engine.IO packets separated by the
/// record separator (0x1E). An Engine.IO packet is its type digit and its data: `0` open (the session id), `1` close,
/// `2` ping and `3` pong (the heartbeat; `2probe`/`3probe` test an upgrade), `4` message (a Socket.IO packet), `5`
/// upgrade, `6` noop, and `b…` a base64 binary attachment in a polling payload (a binary WebSocket message on an
/// upgraded connection). One message is one Socket.IO EVENT or BINARY_EVENT: its JSON array (`["tick",{"seq":1}]`),
/// ending on the wire at the end of its packet. CONNECT (its auth recorded: ``SocketIOSession``), DISCONNECT,
/// CONNECT_ERROR and ACK packets are protocol events, not messages.
///
/// Memory is bounded: a head up to ``headLimit`` bytes, a packet up to `cap` bytes (a larger one is counted as
/// oversized, read on and not kept). Bytes that are not HTTP/1.1, or a packet of no Engine.IO type, stop the decoder
/// with a problem; the rest of the leg is ignored.
final class SocketIODecoder: LegDecoder {
    /// The longest head (request or status line plus headers) read.
    static let headLimit = 16 * 1024

    enum Mode: Equatable { case head, body, webSocket, stopped }

    /// Client → server: the leg carries requests (and the client's WebSocket frames).
    let upstream: Bool
    let session: SocketIOSession
    let cap: Int
    private(set) var mode = Mode.head
    private var head: [UInt8] = []
    private var headEnd = HTTPHeadMatcher()
    private var body = HTTPBodyReader(.done)
    /// Whether the current body is a payload of packets (else it is skipped: a POST's `ok`, an error page).
    private var bodyCarriesPackets = false
    /// Whether the current body's first byte was read (an answer that does not start with a packet type is not a
    /// payload: the `ok`/`OK` a server answers a POST with).
    private var bodyStarted = false
    /// The current packet of a polling payload, up to `cap` bytes, and its size kept or not.
    private var packet: [UInt8] = []
    private var packetSize = 0
    /// Where the last content byte of the body ended (a chunked body's packet ends there, not at its last chunk), as a
    /// position in the input being decoded (at or below 0 when it was in an earlier one).
    private var contentEnd = 0
    /// An upgraded connection's frames.
    private var webSocket: WebSocketDecoder?
    /// Binary attachments still to come after a binary event or ack.
    private var attachmentsLeft = 0
    /// The current event as an object keyed by index (``JSONArrayIndexer``), kept between events.
    private var indexed: [UInt8] = []
    /// The current body's `Content-Encoding` (`gzip`, `deflate`: python-engineio compresses polling answers over 1 KB)
    /// as an inflater, made once per encoding and reset per body; nil: not compressed.
    private var inflater: Inflater?
    private var inflaters: [String: Inflater] = [:]

    /// A decoder for the `upstream` (client → server) or downstream leg, sharing `session` with the connection's
    /// other legs; packets over `cap` bytes are counted, not kept.
    init(upstream: Bool, session: SocketIOSession, cap: Int) {
        self.upstream = upstream
        self.session = session
        self.cap = cap
    }

    var hasPartialMessage: Bool {
        switch mode {
        case .head, .stopped: false
        case .body: packetSize > 0
        case .webSocket: webSocket?.hasPartialMessage ?? false
        }
    }

    /// The bytes the decoder holds in its buffers (what a test checks stays bounded).
    var bufferedCapacity: Int { head.capacity + packet.capacity + (webSocket?.bufferedCapacity ?? 0) }

    /// On an upgraded connection whose WebSocket decoder can hand its state over: every other byte of state
    /// (attachments still to come) is copied with it (``adoptState(of:)``). Long polling is decoded per copy.
    var canHandOverState: Bool { mode == .webSocket && webSocket?.canHandOverState == true }

    /// Takes the state of `other`, the decoder of the same leg's other copy, which decoded the bytes this one skipped
    /// (``canHandOverState`` held for both when it began to): its WebSocket decoder's, or that it stopped.
    func adoptState(of other: any LegDecoder) -> Bool {
        guard let other = other as? SocketIODecoder, other.upstream == upstream else { return false }
        switch other.mode {
        case .webSocket:
            guard let theirs = other.webSocket else { return false }
            let ours = webSocket ?? WebSocketDecoder(upstream: upstream, session: session.webSocket, cap: cap)
            guard ours.adoptState(of: theirs) else { return false }
            webSocket = ours
        case .stopped:
            webSocket = nil
        case .head, .body:
            return false
        }
        (mode, attachmentsLeft) = (other.mode, other.attachmentsLeft)
        (head, packet, packetSize, bodyCarriesPackets) = ([], [], 0, false)
        return true
    }

    func dropPartial() {
        packet = []
        packetSize = 0
        webSocket?.dropPartial()
    }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        defer { contentEnd -= input.count }
        var position = 0
        while position < input.count {
            switch mode {
            case .head: position = readHead(input, from: position, output)
            case .body: position = readBody(input, from: position, output)
            case .webSocket:
                feedWebSocket(UnsafeBufferPointer(rebasing: input[position...]), base: position, output)
                return
            case .stopped: return
            }
        }
    }

    // MARK: HTTP

    /// Reads a head up to its blank line (line ends between messages skipped); returns where its body starts.
    private func readHead(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        var first = start
        while head.isEmpty, first < input.count, input[first] == 13 || input[first] == 10 { first += 1 }
        var position = first
        var ended = false
        while position < input.count, !ended, head.count + position - first <= Self.headLimit {
            ended = headEnd.ends(with: input[position])
            position += 1
        }
        head.append(contentsOf: UnsafeBufferPointer(rebasing: input[first..<position]))
        guard ended else {
            if head.count > Self.headLimit { stop("no end of the HTTP headers within \(Self.headLimit) bytes", at: position, output) }
            return mode == .stopped ? input.count : position
        }
        let bytes = head
        head = []
        headEnded(bytes, at: position, output)
        return mode == .stopped ? input.count : position
    }

    private func headEnded(_ bytes: [UInt8], at end: Int, _ output: (DecoderOutput) -> Void) {
        let parsed = HTTPHead(bytes)
        let parts = parsed.startLine.split(separator: " ", maxSplits: 2).map(String.init)
        if upstream {
            guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else {
                return stop("not an HTTP/1.1 request: \(parsed.startLine.prefix(80))", at: end, output)
            }
            session.requested(target: parts[1], headers: parsed.headers)
            output(.event(.requestRead, at: end))
            if parsed.header("upgrade")?.lowercased().contains("websocket") == true {
                return upgrade(bytes, at: end, output)
            }
            output(.event(.counted("eioPolls"), at: end))
            startBody(parsed, packets: parts[0] == "POST", end: end, output)
        } else {
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...599).contains(status) else {
                return stop("not an HTTP/1.1 status line: \(parsed.startLine.prefix(80))", at: end, output)
            }
            if status == 101 { return upgrade(bytes, at: end, output) }
            if (100...199).contains(status) { return }  // an interim answer: the real one follows
            // The proxy answers 400 itself (`eio-session-unknown`): a written answer no read one matches counts too.
            if status != 200 { output(.event(.coded("eioRefusals", code: "\(status)", proxyMayWrite: true), at: end)) }
            if status == 204 || status == 304 { return }
            startBody(parsed, packets: status == 200, end: end, output)
        }
    }

    /// Reads the body the head frames: chunked, `Content-Length`, or (a response with neither) up to the close.
    private func startBody(_ head: HTTPHead, packets: Bool, end: Int, _ output: (DecoderOutput) -> Void) {
        guard let framed = HTTPBodyReader.framing(of: head, request: upstream) else {
            return stop("a Content-Length that is not a number: \(head.header("content-length")?.prefix(40) ?? "")", at: end, output)
        }
        body = framed
        guard body.state != .done else { return }
        mode = .body
        bodyCarriesPackets = packets
        inflater = nil
        if packets, let encoding = head.header("content-encoding")?.lowercased(), encoding != "identity" {
            guard encoding == "gzip" || encoding == "deflate" else {
                return stop("a body in Content-Encoding \(encoding.prefix(40)), which the audit does not read", at: end, output)
            }
            if inflaters[encoding] == nil { inflaters[encoding] = Inflater(gzip: encoding == "gzip") }
            inflater = inflaters[encoding]
            inflater?.reset()
        }
        bodyStarted = false
        packet.removeAll(keepingCapacity: true)
        packetSize = 0
    }

    private func readBody(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        let (next, found) = body.step(input, from: start)
        switch found {
        case .content(let range)?:
            if bodyCarriesPackets {
                if let inflater {
                    // Inflated, a packet ends on the wire with the compressed bytes that complete it.
                    let inflated = inflater.inflate(UnsafeBufferPointer(rebasing: input[range])) { plain in
                        payload(plain, 0..<plain.count, endingAt: range.upperBound, output)
                    }
                    if !inflated { stop("a compressed body that does not inflate", at: range.lowerBound, output) }
                } else {
                    payload(input, range, output)
                }
            }
            contentEnd = range.upperBound
        case .ended?: bodyEnded(output)
        case .problem(let reason, let at)?: stop(reason, at: at, output)
        case nil: break
        }
        if mode == .body, body.state == .done { bodyEnded(output) }
        return mode == .stopped ? input.count : next
    }

    /// The end of a body: its last packet is complete.
    private func bodyEnded(_ output: (DecoderOutput) -> Void) {
        if bodyCarriesPackets, packetSize > 0 { packetEnded(at: contentEnd, output) }
        mode = .head
        bodyCarriesPackets = false
    }

    /// A run of a payload's bytes: packets separated by the record separator; each ends on the wire at its separator,
    /// or at `endingAt` (a position in the input) when the bytes are inflated from it.
    private func payload(
        _ input: UnsafeBufferPointer<UInt8>,
        _ range: Range<Int>,
        endingAt wireEnd: Int? = nil,
        _ output: (DecoderOutput) -> Void
    ) {
        if !bodyStarted, !range.isEmpty {
            bodyStarted = true
            let first = input[range.lowerBound]
            if !upstream, !(UInt8(ascii: "0")...UInt8(ascii: "6")).contains(first), first != UInt8(ascii: "b") {
                bodyCarriesPackets = false
                return
            }
        }
        var start = range.lowerBound
        while start < range.upperBound, mode == .body {
            let separator = (start..<range.upperBound).first { input[$0] == 0x1E }
            let runEnd = separator ?? range.upperBound
            let keep = max(0, min(runEnd - start, cap + 1 - packet.count))
            if keep > 0 { packet.append(contentsOf: UnsafeBufferPointer(rebasing: input[start..<(start + keep)])) }
            packetSize += runEnd - start
            guard let separator else { return }
            packetEnded(at: wireEnd ?? separator, output)
            start = separator + 1
        }
    }

    private func packetEnded(at end: Int, _ output: (DecoderOutput) -> Void) {
        defer {
            packet.removeAll(keepingCapacity: packet.capacity <= 4096)
            packetSize = 0
        }
        guard packetSize <= cap else { return output(.event(.oversized(bytes: packetSize, end: end), at: end)) }
        packet.withUnsafeBufferPointer { engineIO($0, binary: false, end: end, output) }
    }

    // MARK: WebSocket

    /// The request or answer that upgrades the connection: its frames from now on, read by a WebSocket decoder that
    /// reads the same head first (for the handshake's record: permessage-deflate).
    private func upgrade(_ head: [UInt8], at end: Int, _ output: (DecoderOutput) -> Void) {
        let decoder = WebSocketDecoder(upstream: upstream, session: session.webSocket, cap: cap)
        webSocket = decoder
        mode = .webSocket
        head.withUnsafeBufferPointer { bytes in
            decoder.decode(bytes) { found in
                switch found {
                case .problem(let problem, _): output(.problem(problem, at: end))
                case .event(let event, _): output(.event(event, at: end))
                default: break
                }
            }
        }
        if decoder.phase == .stopped { mode = .stopped }
    }

    /// Frames of an upgraded connection: each text message an Engine.IO packet, each binary one an attachment.
    private func feedWebSocket(_ input: UnsafeBufferPointer<UInt8>, base: Int, _ output: (DecoderOutput) -> Void) {
        guard let webSocket else { return }
        webSocket.decode(input) { found in
            switch found {
            case .message(let bytes, let end, let binary, _): engineIO(bytes, binary: binary, end: base + end, output)
            case .callMessage, .callEnded: break
            case .event(let event, let at):
                if case .oversized(let bytes, let end) = event {
                    output(.event(.oversized(bytes: bytes, end: base + end), at: base + at))
                } else {
                    output(.event(event, at: base + at))
                }
            case .problem(let problem, let at):
                mode = .stopped
                output(.problem(problem, at: base + at))
            }
        }
    }

    // MARK: Engine.IO and Socket.IO packets

    private func engineIO(_ bytes: UnsafeBufferPointer<UInt8>, binary: Bool, end: Int, _ output: (DecoderOutput) -> Void) {
        if binary || bytes.first == UInt8(ascii: "b") {
            // A binary attachment of the last binary event or ack (base64 in a polling payload).
            if attachmentsLeft > 0 { attachmentsLeft -= 1 }
            return
        }
        guard let type = bytes.first else { return }  // an empty packet
        let data = UnsafeBufferPointer(rebasing: bytes[1...])
        switch type {
        case UInt8(ascii: "0"):
            output(.event(.counted("eioOpens"), at: end))
            if !upstream, let sid = SocketIOSessions.scalars(ofJSON: data)["sid"] { session.opened(sid: sid) }
        case UInt8(ascii: "1"):
            output(.event(.closing, at: end))
            output(.event(.counted("eioCloses"), at: end))
        case UInt8(ascii: "2"):
            if data.elementsEqual("probe".utf8) {
                output(.event(.counted("eioProbes"), at: end))
            } else {
                output(.event(.keepalive(ack: false, opaque: 0), at: end))
            }
        case UInt8(ascii: "3"):
            if !data.elementsEqual("probe".utf8) { output(.event(.keepalive(ack: true, opaque: 0), at: end)) }
        case UInt8(ascii: "4"):
            socketIO(data, end: end, output)
        case UInt8(ascii: "5"):
            output(.event(.counted("eioUpgrades"), at: end))
        case UInt8(ascii: "6"):
            break
        default:
            stop("an Engine.IO packet of no known type ('\(Character(Unicode.Scalar(type)))')", at: end, output)
        }
    }

    private func socketIO(_ bytes: UnsafeBufferPointer<UInt8>, end: Int, _ output: (DecoderOutput) -> Void) {
        guard let packet = SocketIOPacket.parse(bytes) else {
            return output(
                .event(.unreadable(reason: "a Socket.IO packet that does not parse: \(String(decoding: bytes.prefix(40), as: UTF8.self))"), at: end)
            )
        }
        let payload = UnsafeBufferPointer(rebasing: bytes[packet.payload])
        switch packet.kind {
        case .connect:
            guard upstream else { return }
            let auth = SocketIOSessions.scalars(ofJSON: payload)
            session.connected(auth: auth)
            output(.event(.counted("sioConnects"), at: end))
            if auth["pid"] != nil || auth["offset"] != nil { output(.event(.counted("sioRecoveries"), at: end)) }
            output(.event(.requestRead, at: end))  // `stream: auth:KEY` is known now
            // A resume point in the stream's own seqs (an app that resumes by seq; Socket.IO's own recovery offset is
            // an opaque event id, which says nothing of seqs).
            if let offset = auth["offset"].flatMap({ Int64($0) }) { output(.event(.resumePoint(offset), at: end)) }
        case .disconnect:
            output(.event(.counted("sioDisconnects"), at: end))
        case .connectError:
            output(.event(.counted("sioConnectErrors"), at: end))
        case .ack, .binaryAck:
            attachmentsLeft = packet.attachments
            output(.event(.counted("sioAcks"), at: end))
        case .event, .binaryEvent:
            attachmentsLeft = packet.attachments
            if !session.audited.auditsEverything, !session.audited.audits(namespace: packet.namespace, payload: payload) {
                return output(.event(.counted("sioUnauditedEvents"), at: end))
            }
            if session.firstArgument {
                // Every path reads inside the first argument: the message is the arguments from it on, in place (the
                // field scanner stops at the first argument's end).
                let arguments = JSONArrayIndexer.arguments(ofEvent: payload) ?? JSONArrayIndexer.element(1, ofArray: payload)
                let argument = arguments.map { UnsafeBufferPointer(rebasing: payload[$0]) }
                return output(.message(argument ?? payload, end: end, binary: false))
            }
            guard JSONArrayIndexer.object(fromArray: payload, into: &indexed) else {
                return output(.message(payload, end: end, binary: false))
            }
            indexed.withUnsafeBufferPointer { output(.message($0, end: end, binary: false)) }
            if indexed.capacity > 4096 + cap { indexed = [] }
        }
    }

    private func stop(_ reason: String, at position: Int, _ output: (DecoderOutput) -> Void) {
        mode = .stopped
        head = []
        packet = []
        webSocket = nil
        output(.problem(.protocolError(reason), at: position))
    }
}
