import ChaosCore

/// The frame boundaries of one direction of an HTTP/2 connection: the client's preface (after an h2c upgrade
/// request, if any) or the server's `101` head, then 9-byte frame headers (read by ``HTTP2FrameHeader``). A header
/// block that goes on in CONTINUATION frames has no boundary inside it, and the highest stream a client opened is
/// kept (GOAWAY names it).
struct HTTP2BoundaryTracker: SteppingTracker {
    enum Phase: Equatable {
        /// Deciding between a preface and an HTTP/1.1 head (the first byte tells).
        case start
        case head
        /// The client preface: bytes still to come.
        case preface(remaining: Int)
        /// A frame header: its bytes so far (empty: a boundary).
        case header
        /// A frame's payload: bytes still to come.
        case payload(remaining: UInt64)
    }

    let producer: Side
    private(set) var phase = Phase.start
    private var head = HTTPHeadMatcher()
    private var header: [UInt8] = []
    /// Inside a header block that CONTINUATION frames carry on (no frame may come between).
    private var inHeaderBlock = false
    /// Client to server: the highest stream id a HEADERS frame opened.
    private(set) var highestStream: UInt32 = 0

    init(producer: Side) {
        self.producer = producer
    }

    var atBoundary: Bool { phase == .header && header.isEmpty && !inHeaderBlock }

    mutating func step(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        switch phase {
        case .start:
            let client = producer == .client
            phase =
                bytes[index] == UInt8(ascii: client ? "P" : "H")
                ? (client ? .preface(remaining: HTTP2FrameHeader.preface.count) : .head)
                : (client ? .head : .header)
        case .head:
            // After an h2c upgrade request the client still sends the preface.
            if head.ends(with: bytes[index]) {
                phase = producer == .client ? .preface(remaining: HTTP2FrameHeader.preface.count) : .header
            }
            index += 1
        case .preface(let remaining):
            let (next, left) = PayloadSkip.skip(bytes, from: index, remaining: UInt64(remaining))
            index = next
            phase = left == 0 ? .header : .preface(remaining: Int(left))
        case .header:
            header.append(bytes[index])
            index += 1
            guard header.count == HTTP2FrameHeader.size else { return index }
            let frame = HTTP2FrameHeader(header, at: 0)
            if frame.type == 1, producer == .client { highestStream = max(highestStream, frame.stream) }
            if frame.carriesHeaderBlock { inHeaderBlock = frame.headerBlockGoesOn }
            header.removeAll(keepingCapacity: true)
            phase = frame.length == 0 ? .header : .payload(remaining: UInt64(frame.length))
        case .payload(let remaining):
            let (next, left) = PayloadSkip.skip(bytes, from: index, remaining: remaining)
            index = next
            phase = left == 0 ? .header : .payload(remaining: left)
        }
        return index
    }
}
