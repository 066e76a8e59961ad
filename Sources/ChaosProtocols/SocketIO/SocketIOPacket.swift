/// One Socket.IO v5 packet, as it travels in an Engine.IO message packet (`4` followed by this): its type digit, the
/// number of binary attachments of a binary event or ack (`51-`), its namespace (`/chat,`; `/` when absent), its ack
/// id (`13`), then its JSON payload (`["tick",{"seq":1}]` for an event, the auth object for a CONNECT).
struct SocketIOPacket: Equatable {
    /// The packet type (its first character).
    enum Kind: UInt8, Equatable {
        case connect = 0
        case disconnect, event, ack, connectError, binaryEvent, binaryAck
    }

    var kind: Kind
    /// Binary attachments that follow (a binary event or ack), each its own Engine.IO packet.
    var attachments: Int
    var namespace: String
    var ackID: Int?
    /// Where the JSON payload is in the packet's bytes (empty when it has none).
    var payload: Range<Int>

    /// Reads a packet from `bytes` (what follows an Engine.IO message's `4`); nil when the bytes are not one.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> SocketIOPacket? {
        guard let first = bytes.first, first >= 48, let kind = Kind(rawValue: first - 48) else { return nil }
        var index = 1
        var attachments = 0
        if kind == .binaryEvent || kind == .binaryAck {
            var digits = 0
            while index < bytes.count, (48...57).contains(bytes[index]), digits < 6 {
                attachments = attachments * 10 + Int(bytes[index] - 48)
                index += 1
                digits += 1
            }
            guard digits > 0, index < bytes.count, bytes[index] == UInt8(ascii: "-") else { return nil }
            index += 1
        }
        var namespace = "/"
        if index < bytes.count, bytes[index] == UInt8(ascii: "/") {
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: ","), index - start < 256 { index += 1 }
            namespace = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
        }
        var ackID: Int?
        var digits = 0
        while index < bytes.count, (48...57).contains(bytes[index]), digits < 18 {
            ackID = (ackID ?? 0) * 10 + Int(bytes[index] - 48)
            index += 1
            digits += 1
        }
        return SocketIOPacket(kind: kind, attachments: attachments, namespace: namespace, ackID: ackID, payload: index..<bytes.count)
    }
}
