import ChaosCore

/// Follows where the frames of one direction of a connection begin, reading only frame headers and skipping
/// payloads by their length, so that the proxy can put a frame of its own between two frames (a `ws-close` or
/// `goaway` fault) without ever cutting one. It keeps a few bytes of state, whatever the traffic.
///
/// WebSocket: the HTTP/1.1 head of the upgrade (request or response) up to its empty line, then RFC 6455 frame
/// headers (2 to 14 bytes: 7/16/64-bit lengths, the masking key). HTTP/2: the client's preface (after an h2c
/// upgrade request, if any) or the server's `101` head, then 9-byte frame headers; a header block that goes on in
/// CONTINUATION frames has no boundary inside it, and the highest stream a client opened is kept (GOAWAY names it).
struct FrameBoundaryTracker {
    enum Phase: Equatable {
        /// Deciding between a preface and an HTTP/1.1 head (HTTP/2 only; the first byte tells).
        case start
        /// An HTTP/1.1 head: how much of the closing CRLF CRLF has matched so far.
        case head(matched: Int)
        /// The HTTP/2 client preface: bytes still to come.
        case preface(remaining: Int)
        /// A frame header: its bytes so far (empty: a boundary).
        case header
        /// A frame's payload: bytes still to come.
        case payload(remaining: UInt64)
    }

    let framing: FrameProtocol
    let producer: Side
    private(set) var phase: Phase
    private var header: [UInt8] = []
    /// HTTP/2: inside a header block that CONTINUATION frames carry on (no frame may come between).
    private var inHeaderBlock = false
    /// HTTP/2, client to server: the highest stream id a HEADERS frame opened.
    private(set) var highestStream: UInt32 = 0
    private static let preface = 24

    init(framing: FrameProtocol, producer: Side) {
        self.framing = framing
        self.producer = producer
        phase = framing == .websocket ? .head(matched: 0) : .start
    }

    /// Whether the next byte would begin a frame: a frame of the proxy's own may go here.
    var atBoundary: Bool { phase == .header && header.isEmpty && !inHeaderBlock }

    /// Follows `bytes`; with `stopAtBoundary`, stops at the first boundary (at once when already at one).
    /// Returns how many bytes it consumed.
    mutating func advance(_ bytes: UnsafeRawBufferPointer, stopAtBoundary: Bool) -> Int {
        var index = 0
        while index < bytes.count {
            if stopAtBoundary, atBoundary { return index }
            switch phase {
            case .start:
                phase = bytes[index] == UInt8(ascii: producer == .client ? "P" : "H")
                    ? (producer == .client ? .preface(remaining: Self.preface) : .head(matched: 0))
                    : (producer == .client ? .head(matched: 0) : .header)
            case .head(let matched):
                let byte = bytes[index]
                index += 1
                let expected: UInt8 = matched % 2 == 0 ? 13 : 10
                let next = byte == expected ? matched + 1 : (byte == 13 ? 1 : 0)
                if next == 4 {
                    // After an h2c upgrade request the client still sends the preface.
                    phase = framing == .http2 && producer == .client ? .preface(remaining: Self.preface) : .header
                } else {
                    phase = .head(matched: next)
                }
            case .preface(let remaining):
                let take = min(remaining, bytes.count - index)
                index += take
                phase = take == remaining ? .header : .preface(remaining: remaining - take)
            case .header:
                header.append(bytes[index])
                index += 1
                if let length = payloadLength() {
                    header.removeAll(keepingCapacity: true)
                    phase = length == 0 ? .header : .payload(remaining: length)
                }
            case .payload(let remaining):
                let take = Int(min(remaining, UInt64(bytes.count - index)))
                index += take
                let left = remaining - UInt64(take)
                phase = left == 0 ? .header : .payload(remaining: left)
            }
        }
        return index
    }

    /// The payload length once the whole frame header is in (nil while it is not).
    private mutating func payloadLength() -> UInt64? {
        switch framing {
        case .websocket:
            guard header.count >= 2 else { return nil }
            let short = header[1] & 0x7f, masked = header[1] & 0x80 != 0
            let extra = short == 126 ? 2 : short == 127 ? 8 : 0
            guard header.count == 2 + extra + (masked ? 4 : 0) else { return nil }
            guard extra > 0 else { return UInt64(short) }
            return header[2..<(2 + extra)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        case .http2:
            guard header.count == 9 else { return nil }
            let type = header[3], flags = header[4]
            let stream = UInt32(header[5] & 0x7f) << 24 | UInt32(header[6]) << 16 | UInt32(header[7]) << 8 | UInt32(header[8])
            if type == 1, producer == .client { highestStream = max(highestStream, stream) }
            if type == 1 || type == 5 || type == 9 { inHeaderBlock = flags & 0x4 == 0 }
            return UInt64(header[0]) << 16 | UInt64(header[1]) << 8 | UInt64(header[2])
        }
    }
}
