/// The frame boundaries of one direction of a WebSocket connection: the HTTP/1.1 head of the upgrade (request or
/// response) up to its empty line, then RFC 6455 frame headers (read by ``WebSocketFrameHeader``).
struct WebSocketBoundaryTracker: SteppingTracker {
    enum Phase: Equatable {
        case head
        /// A frame header: its bytes so far (empty: a boundary).
        case header
        /// A frame's payload: bytes still to come.
        case payload(remaining: UInt64)
    }

    private(set) var phase: Phase
    private var head = HTTPHeadMatcher()
    private var header: [UInt8] = []

    /// A tracker from the upgrade's head on, or (`afterHead`) from the first frame on, when another tracker read the head.
    init(afterHead: Bool = false) {
        phase = afterHead ? .header : .head
    }

    var atBoundary: Bool { phase == .header && header.isEmpty }

    mutating func step(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        switch phase {
        case .head:
            if head.ends(with: bytes[index]) { phase = .header }
            index += 1
        case .header:
            header.append(bytes[index])
            index += 1
            guard header.count >= 2, header.count == WebSocketFrameHeader.size(second: header[1]) else { return index }
            let length = WebSocketFrameHeader.payloadLength(header)
            header.removeAll(keepingCapacity: true)
            phase = length == 0 ? .header : .payload(remaining: length)
        case .payload(let remaining):
            let (next, left) = PayloadSkip.skip(bytes, from: index, remaining: remaining)
            index = next
            phase = left == 0 ? .header : .payload(remaining: left)
        }
        return index
    }
}
