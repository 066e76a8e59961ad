import ChaosCore

/// The start of every connection of the `grpc` fuzz target: the client's preface, SETTINGS and the request HEADERS
/// of one bidirectional call on stream 1 (metadata `x-session: c1`, `grpc-encoding: gzip`), the server's SETTINGS,
/// its SETTINGS acknowledgement and the response HEADERS (`grpc-encoding: gzip`), each read and written. The
/// fuzzer's bytes then continue both directions (DATA frames, trailers, more calls, anything).
enum GRPCPrelude {
    static let client = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(4, []) + headers(1, [
        (":method", "POST"), (":scheme", "http"), (":path", "/follow.v1.Follow/Race"), (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"), ("te", "trailers"), ("x-session", "c1"), ("grpc-encoding", "gzip"),
    ])
    static let server = frame(4, []) + frame(4, flags: 1, []) + headers(1, [
        (":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "gzip"),
    ])

    static let events: [TrafficEvent.Kind] = [.read(.client, client), .written(.server, client),
                                              .read(.server, server), .written(.client, server)]

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        let head: [UInt8] = [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
        let id: [UInt8] = [UInt8(stream >> 24), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
        return head + id + payload
    }

    /// A HEADERS frame (END_HEADERS) of literals without indexing, new names, no Huffman (RFC 7541 6.2.2).
    static func headers(_ stream: UInt32, _ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0, UInt8(name.utf8.count)] + Array(name.utf8)
            block += [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return frame(1, flags: 0x4, stream: stream, block)
    }
}
