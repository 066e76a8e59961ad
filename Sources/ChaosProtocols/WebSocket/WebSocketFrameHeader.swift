/// RFC 6455 frame headers (2 to 14 bytes: FIN and opcode, the mask bit and a 7, 16 or 64-bit payload length, the
/// masking key), read in one place for the decoder and the proxy's boundary tracker.
enum WebSocketFrameHeader {
    /// The size of a frame header whose second byte is `second`.
    @inline(__always)
    static func size(second: UInt8) -> Int {
        let length = second & 0x7F
        return 2 + (length == 126 ? 2 : length == 127 ? 8 : 0) + (second & 0x80 != 0 ? 4 : 0)
    }

    /// The payload length of a whole header (`header.count == size(second: header[1])`).
    @inline(__always)
    static func payloadLength<Bytes: RandomAccessCollection>(_ header: Bytes) -> UInt64 where Bytes.Element == UInt8, Bytes.Index == Int {
        let start = header.startIndex
        let short = header[start + 1] & 0x7F
        let extra = short == 126 ? 2 : short == 127 ? 8 : 0
        guard extra > 0 else { return UInt64(short) }
        return header[(start + 2)..<(start + 2 + extra)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}
