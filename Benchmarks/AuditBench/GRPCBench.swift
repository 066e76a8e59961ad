import ChaosAudit
import ChaosCore
import ChaosProtocols
import Foundation

// `AuditBench grpc [MESSAGES]`: the gRPC audit (cleartext HTTP/2) of ~100-byte protobuf RaceUpdate messages on one
// bidirectional call (server → client, its stream named by the call's x-session metadata), by field number and
// with the descriptor set, as a ratio to the NDJSON lines path on the same number of messages in the same run.
// Two layouts of the same messages: one gRPC message per DATA frame, and 16 KiB DATA frames packed with messages
// (many per frame, one split across every frame boundary). Either way the bytes are cut into ~64 KiB reads.

/// The descriptor set of the test schema (follow.proto: RaceRequest, RaceUpdate).
private let protoset = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/protos/follow.protoset").path

/// Hand-built HTTP/2 and protobuf bytes, just enough for one call.
private enum H2 {
    static let preface = HTTP2FrameWriter.preface

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        HTTP2FrameWriter.frame(type, flags: flags, stream: stream, payload)
    }

    static func word(_ value: UInt32) -> [UInt8] { HTTP2FrameWriter.word(value) }

    static func headers(_ stream: UInt32, _ fields: [(String, String)]) -> [UInt8] {
        HTTP2FrameWriter.literalHeaders(stream, fields)
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7f) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    static func string(_ field: UInt64, _ text: String) -> [UInt8] {
        varint(field << 3 | 2) + varint(UInt64(text.utf8.count)) + Array(text.utf8)
    }

    /// A RaceUpdate (follow.proto): sequence_id 3, session_id 1, riders 4, checksum 5 (fixed64), kind 7.
    static func update(seq: Int) -> [UInt8] {
        varint(3 << 3) + varint(UInt64(seq)) + string(1, "c1") + string(4, String(repeating: "r", count: 76))
            + varint(5 << 3 | 1) + [UInt8](repeating: 0xab, count: 8) + string(7, "MSG")
    }

    /// A gRPC length-prefixed message.
    static func grpc(_ message: [UInt8]) -> [UInt8] { [0] + word(UInt32(message.count)) + message }
}

/// Cuts `bytes` into reads of about 64 KiB.
private func cut(_ bytes: [UInt8]) -> [[UInt8]] {
    stride(from: 0, to: bytes.count, by: 65_519).map { Array(bytes[$0..<min(bytes.count, $0 + 65_519)]) }
}

func grpcBench(messages: Int) throws {
    let path = "/follow.v1.Follow/Race"
    let request =
        H2.preface + H2.frame(4, [])
        + H2.headers(
            1,
            [
                (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1"),
                ("content-type", "application/grpc"), ("te", "trailers"), ("x-session", "c1"),
            ]
        )
    let response = H2.frame(4, []) + H2.frame(4, flags: 1, []) + H2.headers(1, [(":status", "200"), ("content-type", "application/grpc")])
    let bodies = (1...messages).map(H2.update)
    let lines = cut(
        bodies.indices.flatMap { index in
            Array("{\"type\":\"MSG\",\"stream\":\"c1\",\"seq\":\(index + 1),\"payload\":\"\(String(repeating: "x", count: 48))\"}\n".utf8)
        }
    )
    // One message per DATA frame.
    var perFrame = response
    for body in bodies { perFrame += H2.frame(0, stream: 1, H2.grpc(body)) }
    // 16 KiB DATA frames (the default SETTINGS_MAX_FRAME_SIZE) over the messages laid end to end.
    let stream = bodies.flatMap(H2.grpc)
    var packed = response
    for start in stride(from: 0, to: stream.count, by: 16_384) {
        packed += H2.frame(0, stream: 1, Array(stream[start..<min(stream.count, start + 16_384)]))
    }
    let numbered = ProtocolSpec(
        framing: .grpc,
        format: .protobuf,
        seq: "2",
        stream: "header:x-session",
        ack: "3",
        downstream: .init(seq: "3", ack: "6")
    )
    let named = ProtocolSpec(
        framing: .grpc,
        format: .protobuf,
        seq: "sequence_id",
        stream: "header:x-session",
        ack: "acked_sequence_id",
        descriptors: protoset
    )

    let linesRate = try auditDownstream(ProtocolSpec(), lines, expecting: messages)
    print(
        "grpc: \(messages) protobuf RaceUpdate messages of \(bodies[messages / 2].count) bytes on one bidi call, server -> client, each decoded as sent and as delivered"
    )
    print("  lines".padding(toLength: 50, withPad: " ", startingAt: 0) + String(format: "%.2f M messages/s", linesRate / 1e6))
    for (layout, bytes) in [("a message per DATA frame", perFrame), ("16 KiB DATA frames", packed)] {
        for (fields, spec) in [("field numbers", numbered), ("descriptors", named)] {
            let rate = try auditDownstream(spec, cut(bytes), expecting: messages, upstream: request)
            print(
                "  grpc, \(layout), \(fields)".padding(toLength: 50, withPad: " ", startingAt: 0)
                    + String(format: "%.2f M messages/s  ratio to lines %.2f (target >= 0.5)", rate / 1e6, rate / linesRate)
            )
        }
    }
}
