/// An RFC 9113 frame header (9 bytes: a 24-bit length, the type, the flags, a 31-bit stream id), read in one
/// place for the decoder and the proxy's boundary tracker.
struct HTTP2FrameHeader {
    static let size = 9
    /// The client's connection preface.
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    var length: Int
    var type: UInt8
    var flags: UInt8
    var stream: UInt32

    /// The header in `bytes` at `at` (9 bytes must be there).
    @inline(__always)
    init(_ bytes: [UInt8], at h: Int) {
        length = Int(bytes[h]) << 16 | Int(bytes[h + 1]) << 8 | Int(bytes[h + 2])
        type = bytes[h + 3]
        flags = bytes[h + 4]
        stream = UInt32(bytes[h + 5] & 0x7f) << 24 | UInt32(bytes[h + 6]) << 16 | UInt32(bytes[h + 7]) << 8 | UInt32(bytes[h + 8])
    }

    /// A HEADERS, PUSH_PROMISE or CONTINUATION frame: it opens or goes on with a header block.
    var carriesHeaderBlock: Bool { type == 1 || type == 5 || type == 9 }
    /// The header block goes on in CONTINUATION frames (no END_HEADERS flag).
    var headerBlockGoesOn: Bool { flags & 0x4 == 0 }

}
