/// Follows MQTT control packets in one direction (a fixed header's type byte, its remaining length of one to four
/// bytes, then that many bytes skipped), so that the proxy can put a packet of its own between two. On the client's
/// bytes it keeps the first packet's opening bytes: a CONNECT names its protocol level there (4: 3.1.1, 5: 5.0).
/// MQTT over WebSocket (bytes that open with an HTTP upgrade) is not followed: it has no protocol level here, so an
/// `mqtt-disconnect` writes nothing into it and only silences it.
struct MQTTBoundaryTracker: FrameBoundaryTracking {
    private enum Phase {
        case webSocket
        case type
        case length(multiplier: UInt64, value: UInt64, bytes: Int)
        case body(left: UInt64)
    }

    private var phase = Phase.type
    private(set) var atBoundary = true
    /// Up to ``openingBytes`` bytes after the first packet's fixed header.
    private var opening: [UInt8] = []
    private var packets = 0

    /// A CONNECT's protocol name (2 length bytes and up to 6, `MQIsdp` for 3.1) and its level.
    private static let openingBytes = 9

    /// The protocol level the first packet (a CONNECT) names: 3 (3.1), 4 (3.1.1) or 5 (5.0); nil before it is read.
    var protocolLevel: UInt8? {
        guard opening.count >= 2 else { return nil }
        let at = 2 + (Int(opening[0]) << 8 | Int(opening[1]))
        return at < opening.count ? opening[at] : nil
    }

    mutating func advance(_ bytes: UnsafeRawBufferPointer, stopAtBoundary: Bool) -> Int {
        var index = 0
        while index < bytes.count {
            if stopAtBoundary, atBoundary { return index }
            switch phase {
            case .webSocket:
                return bytes.count
            case .type where packets == 0 && (bytes[index] == UInt8(ascii: "G") || bytes[index] == UInt8(ascii: "H")):
                phase = .webSocket
                return bytes.count
            case .type:
                atBoundary = false
                phase = .length(multiplier: 1, value: 0, bytes: 0)
                index += 1
            case .length(let multiplier, let value, let count):
                let byte = bytes[index]
                index += 1
                let length = value + UInt64(byte & 0x7f) * multiplier
                // A fourth byte ends the length whatever its top bit says (a broken length is the audit's to report).
                if byte & 0x80 != 0, count < 3 {
                    phase = .length(multiplier: multiplier << 7, value: length, bytes: count + 1)
                } else if length == 0 {
                    endPacket()
                } else {
                    phase = .body(left: length)
                }
            case .body(let left):
                let take = Int(min(left, UInt64(bytes.count - index)))
                if packets == 0, opening.count < Self.openingBytes {
                    opening += bytes[index..<(index + min(take, Self.openingBytes - opening.count))]
                }
                index += take
                if left == UInt64(take) { endPacket() } else { phase = .body(left: left - UInt64(take)) }
            }
        }
        return index
    }

    private mutating func endPacket() {
        packets += 1
        phase = .type
        atBoundary = true
    }
}
