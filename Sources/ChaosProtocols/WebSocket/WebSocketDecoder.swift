/// One leg of a WebSocket connection (RFC 6455): the HTTP/1.1 upgrade handshake, then frames. Data frames are
/// unmasked, joined across continuation frames (control frames may come in between) and inflated when
/// permessage-deflate (RFC 7692) was negotiated; each complete text or binary message is handed over with the
/// wire position where its last frame ends. Close, ping and pong frames are events, not messages.
///
/// Memory is bounded: a message is buffered up to ``cap`` bytes (inflated size); a larger one is read on
/// (and inflated, to keep a shared window in step) without being kept, and reported as oversized.
/// Bytes that are not WebSocket stop the decoder with a problem; the rest of the leg is ignored.
final class WebSocketDecoder: LegDecoder {
    /// The longest handshake (request line or status line plus headers) read.
    static let handshakeLimit = 16 * 1024

    enum Phase: Equatable {
        /// Reading the upgrade request (upstream) or response (downstream).
        case handshake
        /// Between frames, or inside a frame header.
        case header
        /// Inside a frame's payload.
        case payload
        /// After a close frame: nothing more is decoded.
        case closed
        /// After a problem or a refused upgrade: nothing more is decoded.
        case stopped
    }

    /// Client → server: the leg carries the request and masked frames.
    let upstream: Bool
    /// What the handshake decided, shared with the connection's other legs.
    let session: WebSocketSession
    /// The largest message kept (inflated size).
    let cap: Int
    /// Where the decoder is (the state below is shared with the `+Handshake` and `+Payload` extensions).
    var phase: Phase = .handshake
    /// The handshake read so far, then a frame header split across reads.
    var head: [UInt8] = []

    // The current frame.
    var opcode: UInt8 = 0
    var fin = false
    var masked = false
    /// The masking key, first key byte lowest.
    var mask: UInt32 = 0
    /// The payload position modulo 4 (the mask byte to use next).
    var maskIndex = 0
    var frameLength: UInt64 = 0
    var remaining: UInt64 = 0
    var control: [UInt8] = []

    // The current message (one or more frames).
    var messageOpen = false
    var messageBinary = false
    var messageCompressed = false
    var message: [UInt8] = []
    /// Bytes of the message so far (inflated when compressed), kept or not.
    var messageSize: UInt64 = 0
    var oversized = false
    var inflater: Inflater?
    var scratch: [UInt8] = []

    /// A decoder for the `upstream` (client → server) or downstream leg, sharing `session` with the connection's
    /// other legs; messages over `cap` bytes are counted, not kept.
    init(upstream: Bool, session: WebSocketSession, cap: Int) {
        self.upstream = upstream
        self.session = session
        self.cap = cap
    }

    var hasPartialMessage: Bool {
        switch phase {
        case .handshake, .closed, .stopped: false
        case .header: messageOpen || !head.isEmpty
        case .payload: messageOpen || opcode < 8
        }
    }

    /// The bytes the decoder holds in its buffers (what a test checks stays bounded).
    var bufferedCapacity: Int { head.capacity + control.capacity + message.capacity + scratch.capacity }

    /// Between or inside frames, once the handshake was read: every byte of state is in the fields below (a partial
    /// frame header in `head`, a partial message in `message`, the inflater's window), so another decoder of the same
    /// leg can take it whole (``adoptState(of:)``).
    var canHandOverState: Bool { phase == .header || phase == .payload }

    /// Takes the state of `other`, the decoder of the same leg's other copy, which decoded the bytes this one skipped
    /// (``canHandOverState`` held for both when it began to).
    func adoptState(of other: any LegDecoder) -> Bool {
        guard let other = other as? WebSocketDecoder, other.upstream == upstream else { return false }
        if let theirs = other.inflater {
            let ours = inflater ?? session.deflate.flatMap { Inflater(windowBits: $0.windowBits(upstream: upstream)) }
            guard let ours, ours.adoptState(of: theirs) else { return false }
            inflater = ours
        } else {
            inflater = nil
        }
        (phase, head, control) = (other.phase, other.head, other.control)
        (opcode, fin, masked, mask, maskIndex) = (other.opcode, other.fin, other.masked, other.mask, other.maskIndex)
        (frameLength, remaining) = (other.frameLength, other.remaining)
        (messageOpen, messageBinary, messageCompressed) = (other.messageOpen, other.messageBinary, other.messageCompressed)
        (message, messageSize, oversized) = (other.message, other.messageSize, other.oversized)
        return true
    }

    func dropPartial() {
        head.removeAll(keepingCapacity: false)
        message = []
        messageOpen = false
        if phase == .payload { phase = .header }
    }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        var position = 0
        while position < input.count {
            switch phase {
            case .handshake: position = readHandshake(input, from: position, output)
            case .header: position = readHeader(input, from: position, output)
            case .payload: position = readPayload(input, from: position, output)
            case .closed, .stopped: return
            }
        }
    }

    func stop(_ reason: String, at position: Int, _ output: (DecoderOutput) -> Void) {
        phase = .stopped
        head = []
        message = []
        control = []
        scratch = []
        inflater = nil
        output(.problem(.protocolError(reason), at: position))
    }

    // MARK: frame headers

    private func readHeader(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        if head.isEmpty, input.count - start >= 2 {
            let size = WebSocketFrameHeader.size(second: input[start + 1])
            if input.count - start >= size {
                startFrame(UnsafeBufferPointer(rebasing: input[start..<(start + size)]), endingAt: start + size, output)
                return start + size
            }
        }
        var position = start
        while position < input.count {
            head.append(input[position])
            position += 1
            if head.count >= 2, head.count == WebSocketFrameHeader.size(second: head[1]) {
                let header = head
                head.removeAll(keepingCapacity: true)
                header.withUnsafeBufferPointer { startFrame($0, endingAt: position, output) }
                return position
            }
        }
        return position
    }

    private func startFrame(_ header: UnsafeBufferPointer<UInt8>, endingAt end: Int, _ output: (DecoderOutput) -> Void) {
        let first = header[0]
        let second = header[1]
        fin = first & 0x80 != 0
        let rsv1 = first & 0x40 != 0
        opcode = first & 0x0F
        masked = second & 0x80 != 0
        let length = WebSocketFrameHeader.payloadLength(header)
        let cursor = header.count - (masked ? 4 : 0)
        if masked {
            mask =
                UInt32(header[cursor]) | UInt32(header[cursor + 1]) << 8 | UInt32(header[cursor + 2]) << 16
                | UInt32(header[cursor + 3]) << 24
        }
        maskIndex = 0
        frameLength = length
        remaining = length
        if let problem = check(rsv1: rsv1, rsv23: first & 0x30 != 0, length: length) {
            return stop(problem, at: end, output)
        }
        if opcode >= 8 {
            control.removeAll(keepingCapacity: true)
        } else if opcode != 0 {
            startMessage(binary: opcode == 2, compressed: rsv1)
        }
        if opcode < 8, !messageCompressed {
            let (total, overflow) = messageSize.addingReportingOverflow(length)
            messageSize = overflow ? .max : total
            if !oversized, overflow || total > UInt64(cap) { becomeOversized() }
        }
        guard length > 0 else { return frameEnded(at: end, output) }
        phase = .payload
    }

    /// What is wrong with the frame just read, if anything (RFC 6455 5.2, RFC 7692 6).
    private func check(rsv1: Bool, rsv23: Bool, length: UInt64) -> String? {
        if rsv23 { return "a frame with RSV2 or RSV3 set, and no extension that defines them" }
        if length >> 63 != 0 { return "a 64-bit payload length with its most significant bit set" }
        if upstream, !masked { return "an unmasked frame from the client (RFC 6455 5.1: every client frame is masked)" }
        if !upstream, masked { return "a masked frame from the server (RFC 6455 5.1: server frames are never masked)" }
        switch opcode {
        case 0:
            if !messageOpen { return "a continuation frame with no fragmented message to continue" }
            if rsv1 { return "RSV1 set on a continuation frame" }
        case 1, 2:
            if messageOpen { return "a new data frame inside a fragmented message" }
            if rsv1, session.deflate == nil { return "RSV1 (compressed) set, but permessage-deflate was not negotiated" }
        case 8, 9, 10:
            if !fin { return "a fragmented control frame" }
            if length > 125 { return "a control frame of \(length) bytes (at most 125)" }
            if rsv1 { return "RSV1 set on a control frame" }
        default:
            return "reserved opcode \(opcode)"
        }
        return nil
    }

    private func startMessage(binary: Bool, compressed: Bool) {
        messageOpen = true
        messageBinary = binary
        messageCompressed = compressed
        messageSize = 0
        oversized = false
        if compressed, inflater == nil, let deflate = session.deflate {
            inflater = Inflater(windowBits: deflate.windowBits(upstream: upstream))
        }
    }

    func becomeOversized() {
        oversized = true
        message = []
    }
}
