/// HTTP/2 bytes built by hand, for the tools that feed the decoders (tests, benchmarks, fuzz preludes): the client
/// preface, a frame around a payload, and a header block of plain literals. The audit itself never writes HTTP/2.
package enum HTTP2FrameWriter {
    /// The client's connection preface.
    package static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// A frame: its 9-byte header (24-bit length, type, flags, stream id) and `payload`.
    package static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
            + word(stream) + payload
    }

    /// A 32-bit big-endian word.
    package static func word(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    /// A HEADERS frame (END_HEADERS) whose block is literals without indexing, new names, no Huffman (RFC 7541
    /// 6.2.2): no HPACK state needed. Names and values shorter than 127 bytes.
    package static func literalHeaders(_ stream: UInt32, _ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            precondition(name.utf8.count < 127 && value.utf8.count < 127, "a one-byte HPACK length")
            block += [0, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return frame(1, flags: 0x4, stream: stream, block)
    }
}
