import Testing

@testable import ChaosProtocols

@Suite("HTTP/2 decoding of one direction: preface, frames, HPACK, every way bytes can be cut")
struct HTTP2DirectionDecoderTests {
    private func decode(_ bytes: [UInt8], sender: HTTP2DirectionDecoder.Sender = .client, chunk: Int? = nil) -> [HTTP2Event] {
        Frames.decode(bytes, sender: sender, chunk: chunk)
    }

    private func clientStream() -> [UInt8] {
        var encoder = Frames.Encoder()
        let first = encoder.block(Frames.request(path: "/follow.v1.Follow/Race", session: "s1"))
        // The second block names the same headers again: HPACK sends them as dynamic-table indexes.
        let second = encoder.block(Frames.request(path: "/follow.v1.Follow/Race", session: "s1"))
        #expect(second.count < first.count / 2, "the dynamic table was used")
        // The first request's header block is split over HEADERS + two CONTINUATIONs, with padding and priority.
        let cut1 = first.count / 3
        let cut2 = 2 * first.count / 3
        let headers = Frames.frame(
            1,
            flags: 0x8 | 0x20,
            stream: 1,
            [2] + Frames.word(0) + [15] + Array(first[..<cut1]) + [0, 0]
        )
        return Frames.preface + Frames.settings([(4, 65535)])
            + headers + Frames.frame(9, stream: 1, Array(first[cut1..<cut2])) + Frames.frame(9, flags: 4, stream: 1, Array(first[cut2...]))
            + Frames.data(stream: 1, Frames.grpc([1, 2, 3]), pad: 4)
            + Frames.frame(6, Frames.word(0) + Frames.word(7))
            + Frames.frame(1, flags: 4, stream: 3, second)
            + Frames.frame(8, stream: 0, Frames.word(1000)) + Frames.frame(0xfa, stream: 3, [9, 9])
            + Frames.frame(3, stream: 3, Frames.word(8))
    }

    @Test(
        "preface, SETTINGS, HEADERS with padding and priority over CONTINUATIONs, padded DATA, PING, a second HEADERS from the dynamic table, RST_STREAM"
    )
    func wholeClientStream() {
        let events = decode(clientStream())
        let request = Frames.request(path: "/follow.v1.Follow/Race", session: "s1").map { HTTP2HeaderField($0.0, $0.1) }
        #expect(events.count == 7, "\(events)")
        #expect(events[0] == .preface)
        #expect(events[1] == .settings(ack: false, values: [HTTP2Setting(identifier: 4, value: 65535)]))
        #expect(events[2] == .headers(stream: 1, fields: request, endStream: false))
        guard case .data(1, let payload, false, _) = events[3] else {
            Issue.record("\(events[3])")
            return
        }
        #expect(Array(payload) == Frames.grpc([1, 2, 3]))
        #expect(events[4] == .ping(ack: false, opaque: 7))
        #expect(events[5] == .headers(stream: 3, fields: request, endStream: false))
        #expect(events[6] == .reset(stream: 3, code: 8))
    }

    @Test("fed one byte at a time, or in 7-byte pieces, it sees exactly what it sees fed whole", arguments: [1, 7, 100])
    func everyCut(chunk: Int) {
        let bytes = clientStream()
        #expect(decode(bytes, chunk: chunk) == decode(bytes))
    }

    @Test("the server's side: SETTINGS, its ack, GOAWAY with debug data, trailers")
    func serverSide() {
        var encoder = Frames.Encoder()
        let trailers = encoder.block([("grpc-status", "14"), ("grpc-message", "unavailable")])
        let bytes =
            Frames.settings() + Frames.settings(ack: true)
            + Frames.frame(1, flags: 0x4 | 0x1, stream: 1, trailers)
            + Frames.frame(7, Frames.word(5) + Frames.word(0) + Array("draining".utf8))
        let events = decode(bytes, sender: .server)
        #expect(
            events == [
                .settings(ack: false, values: []), .settings(ack: true, values: []),
                .headers(
                    stream: 1,
                    fields: [HTTP2HeaderField("grpc-status", "14"), HTTP2HeaderField("grpc-message", "unavailable")],
                    endStream: true
                ),
                .goaway(lastStream: 5, code: 0, debug: "draining"),
            ]
        )
    }

    @Test("an h2c upgrade: the HTTP/1.1 request is stream 1, then the preface; the server's 101, then frames")
    func h2cUpgrade() {
        let request = Array(
            "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nX-Session: s9\r\n\r\n"
                .utf8
        )
        let client = decode(request + Frames.preface + Frames.settings(), chunk: 5)
        #expect(
            client == [
                .headers(
                    stream: 1,
                    fields: [
                        HTTP2HeaderField(":method", "GET"), HTTP2HeaderField(":path", "/chat"),
                        HTTP2HeaderField("host", "x"), HTTP2HeaderField("x-session", "s9"),
                    ],
                    endStream: true
                ),
                .preface, .settings(ack: false, values: []),
            ]
        )
        let response = Array("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n".utf8)
        #expect(decode(response + Frames.settings(), sender: .server, chunk: 3) == [.preface, .settings(ack: false, values: [])])
    }

    @Test(
        "bytes that are not HTTP/2 are one protocol error with its offset, and nothing after it is decoded",
        arguments: [
            (Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), Int64(0), "h2c upgrade"),
            (Frames.preface + Frames.frame(9, stream: 1, [1]), Int64(24), "CONTINUATION"),
            (Frames.preface + Frames.frame(6, [1, 2, 3]), Int64(24), "PING"),
            (Frames.preface + Frames.frame(1, flags: 4, stream: 1, [0xff, 0xff, 0xff, 0xff, 0x0f]), Int64(24), "HPACK"),
            (Frames.preface + Frames.frame(0, flags: 0x8, stream: 1, [9, 1]), Int64(24), "DATA"),
            (Frames.preface + Frames.frame(1, stream: 1, [0x82]) + Frames.data(stream: 1, [1]), Int64(24 + 10), "inside the header block"),
            (Array("PRX * HTTP/2.0".utf8), Int64(0), "preface"),
        ] as [([UInt8], Int64, String)]
    )
    func garbage(bytes: [UInt8], offset: Int64, reason: String) {
        for chunk in [1, bytes.count] {
            let events = decode(bytes + Frames.settings(), chunk: chunk)
            guard case .protocolError(let at, let why) = events.last else {
                Issue.record("\(events)")
                continue
            }
            #expect(at == offset)
            #expect(why.contains(reason), "\(why)")
            #expect(events.filter { if case .protocolError = $0 { true } else { false } }.count == 1)
        }
    }

    @Test("a frame header announcing 16 MiB (allowed by SETTINGS) holds no 16 MiB until the bytes come, and a header block is capped")
    func bounded() {
        var decoder = HTTP2DirectionDecoder(sender: .client)
        decoder.maxFrameSize = (1 << 24) - 1
        let header: [UInt8] = Frames.preface + [0xff, 0xff, 0xff, 0, 0] + Frames.word(1) + [1, 2, 3]
        #expect(header.withUnsafeBytes { decoder.feed($0) } == [.preface])
        #expect(decoder.pending.count < 64)
        var blocks = HTTP2DirectionDecoder(sender: .server)
        var events = Frames.frame(1, stream: 1, [0x82]).withUnsafeBytes { blocks.feed($0) }
        let piece = Frames.frame(9, stream: 1, [UInt8](repeating: 0x82, count: 16_384))
        for _ in 0..<80 where !blocks.failed { events += piece.withUnsafeBytes { blocks.feed($0) } }
        guard case .protocolError(_, let why) = events.last else {
            Issue.record("\(events)")
            return
        }
        #expect(why.contains("header block over"))
    }
}
