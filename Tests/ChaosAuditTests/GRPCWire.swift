import ChaosProtocols
import NIOCore
import NIOHPACK

/// Hand-built gRPC over HTTP/2 for the audit tests: frames, header blocks from a real HPACK encoder (one per
/// direction, its dynamic table carried across blocks), length-prefixed messages and protobuf fields.
enum GRPCWire {
    static let preface = HTTP2FrameWriter.preface
    static let race = "/follow.v1.Follow/Race"

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        HTTP2FrameWriter.frame(type, flags: flags, stream: stream, payload)
    }

    static func word(_ value: UInt32) -> [UInt8] { HTTP2FrameWriter.word(value) }

    static func settings(_ values: [(UInt16, UInt32)] = []) -> [UInt8] {
        frame(4, values.flatMap { [UInt8($0.0 >> 8), UInt8($0.0 & 0xff)] + word($0.1) })
    }

    /// A gRPC length-prefixed message.
    static func grpc(_ message: [UInt8], compressed: Bool = false) -> [UInt8] {
        [compressed ? 1 : 0] + word(UInt32(message.count)) + message
    }

    static func data(_ stream: UInt32, _ payload: [UInt8], endStream: Bool = false) -> [UInt8] {
        frame(0, flags: endStream ? 1 : 0, stream: stream, payload)
    }

    static func goaway(last: UInt32, code: UInt32 = 0) -> [UInt8] { frame(7, word(last) + word(code)) }

    static func reset(_ stream: UInt32, code: UInt32) -> [UInt8] { frame(3, stream: stream, word(code)) }

    static func ping(ack: Bool = false) -> [UInt8] { frame(6, flags: ack ? 1 : 0, [UInt8](repeating: 7, count: 8)) }

    /// Protobuf fields: an Int is a varint, a String a length-delimited field, `[UInt8]` a nested message.
    static func proto(_ fields: [(UInt64, Any)]) -> [UInt8] {
        fields.flatMap { number, value -> [UInt8] in
            switch value {
            case let int as Int: Wire.int(number, Int64(int))
            case let text as String: Wire.string(number, text)
            case let bytes as [UInt8]: Wire.bytes(number, bytes)
            default: []
            }
        }
    }

    /// A RaceRequest (follow.proto): sequence_id 2, acked_sequence_id 3, kind 5.
    static func request(seq: Int? = nil, ack: Int? = nil, kind: String = "MSG") -> [UInt8] {
        message(seq: (2, seq), ack: (3, ack), kind: (5, kind))
    }

    /// A RaceUpdate: sequence_id 3, acked_sequence_id 6, kind 7.
    static func update(seq: Int? = nil, ack: Int? = nil, kind: String = "MSG") -> [UInt8] {
        message(seq: (3, seq), ack: (6, ack), kind: (7, kind))
    }

    private static func message(seq: (UInt64, Int?), ack: (UInt64, Int?), kind: (UInt64, String)) -> [UInt8] {
        var bytes: [UInt8] = []
        if let value = seq.1 { bytes += Wire.int(seq.0, Int64(value)) }
        if let value = ack.1 { bytes += Wire.int(ack.0, Int64(value)) }
        return bytes + Wire.string(kind.0, kind.1)
    }

    /// One direction's HPACK encoder, its dynamic table kept across header blocks as a real peer's is.
    struct Encoder {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: true)

        mutating func headers(_ stream: UInt32, _ fields: [(String, String)], endStream: Bool = false) -> [UInt8] {
            var buffer = ByteBufferAllocator().buffer(capacity: 256)
            try! encoder.encode(headers: HPACKHeaders(fields), to: &buffer)
            return GRPCWire.frame(1, flags: 0x4 | (endStream ? 1 : 0), stream: stream, Array(buffer.readableBytesView))
        }

        mutating func request(
            _ stream: UInt32,
            path: String = GRPCWire.race,
            session: String,
            extra: [(String, String)] = []
        ) -> [UInt8] {
            headers(
                stream,
                [
                    (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
                    ("content-type", "application/grpc"), ("te", "trailers"), ("x-session", session),
                ] + extra
            )
        }

        mutating func response(_ stream: UInt32, extra: [(String, String)] = []) -> [UInt8] {
            headers(stream, [(":status", "200"), ("content-type", "application/grpc")] + extra)
        }

        mutating func trailers(_ stream: UInt32, status: Int, message: String = "") -> [UInt8] {
            headers(stream, [("grpc-status", String(status))] + (message.isEmpty ? [] : [("grpc-message", message)]), endStream: true)
        }
    }
}
