/// Splits one direction of one gRPC call into its length-prefixed messages (1 byte compressed flag, 4 bytes
/// big-endian length, the message), whatever the DATA frames' boundaries. A message that lies whole inside one
/// payload is handed over in place; one split across payloads is joined in a buffer of at most `cap` bytes; a
/// longer one is skipped and reported by its length only.
package struct GRPCMessageSplitter: Sendable {
    /// What the splitter found.
    package enum Piece {
        /// A whole message (valid only during the callback) and whether its compressed flag was set.
        case message(UnsafeBufferPointer<UInt8>, compressed: Bool)
        /// A message longer than the cap: skipped, its length reported.
        case oversized(length: Int)
    }

    private var prefix: [UInt8] = []
    private var message: [UInt8] = []
    private var expected = 0
    private var compressed = false
    /// Bytes of an oversized message still to skip.
    private var skipping = 0
    private var inMessage = false

    /// A splitter at the start of a call.
    package init() {}

    /// Whether part of a message (or of its prefix) is waiting for the rest.
    package var hasPartialMessage: Bool { inMessage || !prefix.isEmpty }

    /// Forgets a partial message.
    package mutating func dropPartial() {
        prefix.removeAll()
        message.removeAll()
        inMessage = false
        skipping = 0
    }

    /// Splits the next DATA payload of the call; `emit` gets every message it completes, in order.
    package mutating func feed(_ payload: UnsafeBufferPointer<UInt8>, cap: Int, _ emit: (Piece) -> Void) {
        var index = 0
        while index < payload.count {
            if !inMessage {
                if prefix.isEmpty, payload.count - index >= 5 {
                    let base = index
                    compressed = payload[base] & 1 != 0
                    expected =
                        Int(payload[base + 1]) << 24 | Int(payload[base + 2]) << 16 | Int(payload[base + 3]) << 8
                        | Int(payload[base + 4])
                    index += 5
                    if expected <= cap, payload.count - index >= expected {
                        // The common case: the whole message in this payload, handed over in place.
                        emit(.message(UnsafeBufferPointer(rebasing: payload[index..<(index + expected)]), compressed: compressed))
                        index += expected
                        continue
                    }
                } else {
                    let take = min(5 - prefix.count, payload.count - index)
                    prefix.append(contentsOf: payload[index..<(index + take)])
                    index += take
                    guard prefix.count == 5 else { return }
                    compressed = prefix[0] & 1 != 0
                    expected = Int(prefix[1]) << 24 | Int(prefix[2]) << 16 | Int(prefix[3]) << 8 | Int(prefix[4])
                    prefix.removeAll(keepingCapacity: true)
                }
                inMessage = true
                skipping = expected > cap ? expected : 0
                if skipping == 0 { message.reserveCapacity(min(expected, 1 << 16)) }
                if expected == 0 {
                    inMessage = false
                    emit(.message(UnsafeBufferPointer(start: nil, count: 0), compressed: compressed))
                    continue
                }
            }
            if skipping > 0 {
                let take = min(skipping, payload.count - index)
                skipping -= take
                index += take
                if skipping == 0 {
                    inMessage = false
                    emit(.oversized(length: expected))
                }
                continue
            }
            let take = min(expected - message.count, payload.count - index)
            message.append(contentsOf: payload[index..<(index + take)])
            index += take
            if message.count == expected {
                inMessage = false
                message.withUnsafeBufferPointer { emit(.message($0, compressed: compressed)) }
                message.removeAll(keepingCapacity: true)
            }
        }
    }
}
