import ChaosCore
import Testing

@testable import ChaosProtocols

/// The gRPC plug-in's decoder, leg by leg (what `GRPCObserver` was tested for, now that the audit's decoder is the
/// one gRPC parser): calls, messages across frames and reads, responses, trailers, GOAWAY, PING, resets.
@Suite("gRPC calls decoded over HTTP/2: paths, metadata, messages across frames and reads, trailers, resets")
struct GRPCDecoderTests {
    private static let path = "/chat.v1.Chat/Talk"
    private static let message = Array("a message cut over three DATA frames".utf8)

    /// A request's HEADERS on `stream`.
    private static func call(_ encoder: inout Frames.Encoder, stream: UInt32 = 1) -> [UInt8] {
        Frames.frame(1, flags: 0x4, stream: stream, encoder.block(Frames.request(path: path, session: "s3")))
    }

    @Test("messages split across DATA frames and TCP reads, several per frame, each ending with its frame", arguments: [1, 1000, 1 << 20])
    func messagesAcrossFrames(chunk: Int) throws {
        var encoder = Frames.Encoder()
        let m1 = [UInt8](repeating: 1, count: 10)
        let m2 = [UInt8](repeating: 2, count: 3)
        let m3 = [UInt8](repeating: 3, count: 40_000)
        let stream = Frames.grpc(m1) + Frames.grpc(m2) + Frames.grpc(m3) + Frames.grpc([])
        let head =
            Frames.preface + Frames.settings()
            + Frames.frame(
                1,
                flags: 4,
                stream: 1,
                encoder.block(Frames.request(path: "/p.S/M", session: "s7"))
            )
        // Frame boundaries: inside m1's prefix, then m2 and m3's start, then the rest (over three frames, each
        // within the initial SETTINGS_MAX_FRAME_SIZE).
        let cuts = [3, 30, 16_000, 32_000, stream.count]
        var frames: [UInt8] = []
        var ends: [Int64] = []
        var from = 0
        for cut in cuts {
            frames += Frames.data(stream: 1, Array(stream[from..<cut]), endStream: cut == stream.count)
            ends.append(Int64(head.count + frames.count))
            from = cut
        }
        let session = GRPCSession(auditedMethods: nil)
        let seen = GRPCLegProbe(session, .upstream).feed(head + frames, chunk: chunk)
        #expect(
            seen == [
                .event(.counted("calls")),
                .message(stream: 1, bytes: m1, end: ends[1]), .message(stream: 1, bytes: m2, end: ends[1]),
                .message(stream: 1, bytes: m3, end: ends[4]), .message(stream: 1, bytes: [], end: ends[4]),
            ]
        )
        let call = try #require(session.call(1))
        #expect(call.path == "/p.S/M" && call.header("X-Session") == "s7")
        #expect(
            call.metadata == [
                HTTP2HeaderField("content-type", "application/grpc"), HTTP2HeaderField("te", "trailers"),
                HTTP2HeaderField("x-session", "s7"),
            ]
        )
    }

    @Test("responses: a compressed message it cannot inflate, one over the cap, PING, trailers with grpc-status and GOAWAY pass up")
    func serverSide() {
        var client = Frames.Encoder()
        var server = Frames.Encoder()
        let session = GRPCSession(auditedMethods: nil)
        let request =
            Frames.preface + Frames.settings()
            + Frames.frame(1, flags: 4, stream: 1, client.block(Frames.request(path: "/p.S/M", session: "a")))
        #expect(GRPCLegProbe(session, .upstream).feed(request) == [.event(.counted("calls"))])
        let big = [UInt8](repeating: 7, count: 5000)
        let headers: [UInt8] = Frames.frame(
            1,
            flags: 4,
            stream: 1,
            server.block([(":status", "200"), ("content-type", "application/grpc")])
        )
        let messages: [UInt8] = Frames.grpc([9, 9], compressed: true) + Frames.grpc(big)
        let trailers: [UInt8] = Frames.frame(
            1,
            flags: 5,
            stream: 1,
            server.block([("grpc-status", "4"), ("grpc-message", "deadline exceeded")])
        )
        var response: [UInt8] = Frames.settings() + headers
        response += Frames.data(stream: 1, messages)
        response += Frames.frame(6, flags: 1, Frames.word(0) + Frames.word(3))
        response += trailers
        response += Frames.frame(7, Frames.word(1) + Frames.word(0))
        let seen = GRPCLegProbe(session, .downstream, cap: 100).feed(response)
        let dataEnd = Frames.settings().count + headers.count + 9 + messages.count
        #expect(
            seen == [
                .event(
                    .unreadable(reason: "a message compressed with grpc-encoding 'identity', which the audit cannot inflate (gzip and deflate only)")
                ),
                .event(.oversized(bytes: 5000, end: dataEnd)),
                .event(.keepalive(ack: true, opaque: 3)),
                // The server ends the call: it reads nothing more of it.
                .event(.coded("grpcStatuses", code: "DEADLINE_EXCEEDED")), .ended(stream: 1),
                .event(.coded("goaways", code: "NO_ERROR", proxyMayWrite: true)),
            ]
        )
    }

    @Test("a message over three DATA frames and two TCP reads is one message, handed over when its last frame is in, each way")
    func threeFramesTwoReads() {
        var client = Frames.Encoder()
        var server = Frames.Encoder()
        let wire = Frames.grpc(Self.message)
        // Cuts: inside the 5-byte prefix, then inside the message.
        let frames =
            Frames.data(stream: 1, Array(wire[..<3])) + Frames.data(stream: 1, Array(wire[3..<20]))
            + Frames.data(stream: 1, Array(wire[20...]), endStream: true)
        let request = Frames.preface + Frames.settings() + Self.call(&client) + frames
        let response = Frames.settings() + Frames.frame(1, flags: 0x4, stream: 1, server.block([(":status", "200")])) + frames
        let session = GRPCSession(auditedMethods: nil)
        for (bytes, direction) in [(request, Direction.upstream), (response, .downstream)] {
            let leg = GRPCLegProbe(session, direction)
            // The first read ends inside the second DATA frame's payload.
            let cut = bytes.count - frames.count + 12 + 9 + 5
            let first = leg.feed(Array(bytes[..<cut]))
            #expect(!first.contains { $0.isMessage }, "\(first)")
            // The server's last DATA frame, with END_STREAM, ends the call once its message is handed over.
            let message = GRPCLegProbe.Seen.message(stream: 1, bytes: Self.message, end: Int64(bytes.count))
            #expect(leg.feed(Array(bytes[cut...])) == (direction == .upstream ? [message] : [message, .ended(stream: 1)]), "\(direction)")
        }
    }

    @Test(
        "RST_STREAM mid-message: the reset passes up, the partial message never does, DATA still in flight on the reset stream is ignored, and the next call's messages are whole"
    )
    func resetMidMessage() {
        var encoder = Frames.Encoder()
        let wire = Frames.grpc(Self.message)
        let half = wire.count / 2
        let leg = GRPCLegProbe(GRPCSession(auditedMethods: nil), .upstream)
        let opening: [UInt8] = Frames.preface + Frames.settings() + Self.call(&encoder)
        let start: [UInt8] = opening + Frames.data(stream: 1, Array(wire[..<half]))
        #expect(leg.feed(start) == [.event(.counted("calls"))])
        // The client cancels (CANCEL = 8); a whole message, already in flight, arrives after the reset.
        let reset = Frames.frame(3, stream: 1, Frames.word(8))
        let late = Frames.data(stream: 1, Frames.grpc([5, 5]), endStream: true)
        let next: [UInt8] = Self.call(&encoder, stream: 3) + Frames.data(stream: 3, Frames.grpc([7, 7, 7]), endStream: true)
        let after: [UInt8] = reset + late + next
        let expected: [GRPCLegProbe.Seen] = [
            .ended(stream: 1), .event(.coded("streamResets", code: "CANCEL")), .event(.counted("calls")),
            .message(stream: 3, bytes: [7, 7, 7], end: Int64(start.count + after.count)),
        ]
        #expect(leg.feed(after) == expected)
        #expect(HTTP2ErrorCode.name(8) == "CANCEL")
    }

    @Test("the server's trailers or reset end a call, and either side's reset before them; the client's END_STREAM does not; each call once")
    func endedCalls() {
        var client = Frames.Encoder()
        var server = Frames.Encoder()
        let session = GRPCSession(auditedMethods: nil)
        let up = GRPCLegProbe(session, .upstream)
        let down = GRPCLegProbe(session, .downstream)
        // Call 1 ends its request stream; the client resets call 5.
        var requests = Frames.preface + Frames.settings() + Self.call(&client, stream: 1) + Self.call(&client, stream: 3)
        requests += Self.call(&client, stream: 5) + Frames.data(stream: 1, Frames.grpc([1]), endStream: true)
        #expect(up.feed(requests).allSatisfy { !$0.isEnded }, "a client's END_STREAM ends its requests only")
        func trailers(_ stream: UInt32) -> [UInt8] { Frames.frame(1, flags: 5, stream: stream, server.block([("grpc-status", "0")])) }
        let ok = Event.coded("grpcStatuses", code: "OK")
        #expect(down.feed(Frames.settings() + trailers(1)) == [.event(ok), .ended(stream: 1)])
        #expect(down.feed(Frames.frame(3, stream: 3, Frames.word(2))) == [.ended(stream: 3), .event(.coded("streamResets", code: "INTERNAL_ERROR"))])
        #expect(up.feed(Frames.frame(3, stream: 5, Frames.word(8))) == [.ended(stream: 5), .event(.coded("streamResets", code: "CANCEL"))])
        #expect(up.feed(Frames.frame(3, stream: 3, Frames.word(8))) == [.event(.coded("streamResets", code: "CANCEL"))], "call 3 had ended")
    }

    private typealias Event = ProtocolEvent
}
