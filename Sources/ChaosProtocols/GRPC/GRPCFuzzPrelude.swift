import ChaosCore

/// The start of every connection of the `grpc` fuzz target (``GRPCProtocol/fuzzSetup(_:)``): the client's preface, SETTINGS and the request HEADERS
/// of one bidirectional call on stream 1 (metadata `x-session: c1`, `grpc-encoding: gzip`), the server's SETTINGS,
/// its SETTINGS acknowledgement and the response HEADERS (`grpc-encoding: gzip`), each read and written. The
/// fuzzer's bytes then continue both directions (DATA frames, trailers, more calls, anything).
enum GRPCFuzzPrelude {
    static let client =
        HTTP2FrameWriter.preface + frame(4, [])
        + headers(
            1,
            [
                (":method", "POST"), (":scheme", "http"), (":path", "/follow.v1.Follow/Race"), (":authority", "127.0.0.1"),
                ("content-type", "application/grpc"), ("te", "trailers"), ("x-session", "c1"), ("grpc-encoding", "gzip"),
            ]
        )
    static let server =
        frame(4, []) + frame(4, flags: 1, [])
        + headers(
            1,
            [
                (":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "gzip"),
            ]
        )

    static let events: [TrafficEvent.Kind] = [
        .read(.client, client), .written(.server, client),
        .read(.server, server), .written(.client, server),
    ]

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        HTTP2FrameWriter.frame(type, flags: flags, stream: stream, payload)
    }

    static func headers(_ stream: UInt32, _ fields: [(String, String)]) -> [UInt8] {
        HTTP2FrameWriter.literalHeaders(stream, fields)
    }
}
