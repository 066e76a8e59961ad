import NIOCore
import NIOHPACK

@testable import ChaosProtocols

/// Hand-built HTTP/2 frames for the decoder tests.
enum Frames {
    static let preface = HTTP2FrameWriter.preface

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        HTTP2FrameWriter.frame(type, flags: flags, stream: stream, payload)
    }

    static func word(_ value: UInt32) -> [UInt8] { HTTP2FrameWriter.word(value) }

    static func settings(_ values: [(UInt16, UInt32)] = [], ack: Bool = false) -> [UInt8] {
        frame(4, flags: ack ? 1 : 0, values.flatMap { [UInt8($0.0 >> 8), UInt8($0.0 & 0xff)] + word($0.1) })
    }

    /// A gRPC length-prefixed message.
    static func grpc(_ message: [UInt8], compressed: Bool = false) -> [UInt8] {
        [compressed ? 1 : 0] + word(UInt32(message.count)) + message
    }

    static func data(stream: UInt32, _ payload: [UInt8], endStream: Bool = false, pad: Int = 0) -> [UInt8] {
        if pad > 0 {
            return frame(
                0,
                flags: (endStream ? 1 : 0) | 0x8,
                stream: stream,
                [UInt8(pad)] + payload + [UInt8](repeating: 0, count: pad)
            )
        }
        return frame(0, flags: endStream ? 1 : 0, stream: stream, payload)
    }

    /// An HPACK encoder that keeps its dynamic table across header blocks, as a real peer's does.
    struct Encoder {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: true)

        mutating func block(_ headers: [(String, String)]) -> [UInt8] {
            var buffer = ByteBufferAllocator().buffer(capacity: 256)
            try! encoder.encode(headers: HPACKHeaders(headers), to: &buffer)
            return Array(buffer.readableBytesView)
        }
    }

    static func request(path: String, session: String) -> [(String, String)] {
        [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
            ("content-type", "application/grpc"), ("te", "trailers"), ("x-session", session),
        ]
    }
}

extension Frames {
    /// The start of a TLS handshake record (TLS 1.2 record version) holding one handshake message of `type`
    /// (1 ClientHello, 2 ServerHello), as a TLS peer's first bytes look.
    static func tlsHandshake(_ type: UInt8) -> [UInt8] {
        let body: [UInt8] = [0x03, 0x03] + [UInt8](repeating: 0x5a, count: 32) + [0]
        return [0x16, 0x03, 0x01, 0x00, UInt8(4 + body.count), type, 0x00, 0x00, UInt8(body.count)] + body
    }

    /// The events one decoder returns for `bytes` fed in pieces of `chunk` bytes (whole when nil).
    static func decode(
        _ bytes: [UInt8],
        sender: HTTP2DirectionDecoder.Sender = .client,
        chunk: Int? = nil,
        maxFrameSize: Int = 16_384
    ) -> [HTTP2Event] {
        var decoder = HTTP2DirectionDecoder(sender: sender)
        decoder.maxFrameSize = maxFrameSize
        var events: [HTTP2Event] = []
        let size = chunk ?? max(1, bytes.count)
        for start in stride(from: 0, to: bytes.count, by: size) {
            let piece = Array(bytes[start..<min(bytes.count, start + size)])
            events += piece.withUnsafeBytes { decoder.feed($0) }
        }
        return events
    }
}
