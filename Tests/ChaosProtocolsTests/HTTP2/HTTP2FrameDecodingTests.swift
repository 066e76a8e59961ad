import Testing

@testable import ChaosProtocols

@Suite("HTTP/2 frames one at a time: HPACK state across blocks, padding, GOAWAY, frame types this version does not know")
struct HTTP2FrameDecodingTests {
    @Test("a second header block made of dynamic-table indexes decodes with the table the first block built, and not without it")
    func dynamicTableAcrossBlocks() {
        var encoder = Frames.Encoder()
        let request = Frames.request(path: "/chat.v1.Chat/Talk", session: "s42")
        let first = encoder.block(request)
        let second = encoder.block(request)
        // Each field of the second block is one indexed representation (1xxxxxxx): nothing literal is sent again.
        #expect(second.count == request.count)
        #expect(second.allSatisfy { $0 & 0x80 != 0 })
        let fields = request.map { HTTP2HeaderField($0.0, $0.1) }
        let both = Frames.preface + Frames.frame(1, flags: 0x4, stream: 1, first) + Frames.frame(1, flags: 0x5, stream: 3, second)
        #expect(
            Frames.decode(both) == [
                .preface, .headers(stream: 1, fields: fields, endStream: false),
                .headers(stream: 3, fields: fields, endStream: true),
            ]
        )
        let alone = Frames.decode(Frames.preface + Frames.frame(1, flags: 0x5, stream: 3, second))
        #expect(alone.count == 2)
        guard case .protocolError(24, let why) = alone.last else {
            Issue.record("\(alone)")
            return
        }
        #expect(why.contains("HPACK"))
    }

    @Test(
        "padding is taken off HEADERS and DATA (a zero pad, a 255-byte pad, a frame of padding only) and counted in the end offset",
        arguments: [1, 6, 1000]
    )
    func padding(chunk: Int) {
        var encoder = Frames.Encoder()
        let block = encoder.block([(":status", "200"), ("content-type", "application/grpc")])
        let headers = Frames.frame(1, flags: 0x8 | 0x4, stream: 1, [10] + block + [UInt8](repeating: 0, count: 10))
        let body = Array("hello, padded world".utf8)
        let zeroPad = Frames.frame(0, flags: 0x8, stream: 1, [0] + body)
        let widePad = Frames.data(stream: 1, body, pad: 255)
        let onlyPad = Frames.frame(0, flags: 0x8 | 0x1, stream: 1, [4, 0, 0, 0, 0])
        let bytes = headers + zeroPad + widePad + onlyPad
        var end = Int64(headers.count)
        var ends: [Int64] = []
        for frame in [zeroPad, widePad, onlyPad] {
            end += Int64(frame.count)
            ends.append(end)
        }
        #expect(widePad.count == 9 + 1 + body.count + 255)
        #expect(
            Frames.decode(bytes, sender: .server, chunk: chunk) == [
                .headers(
                    stream: 1,
                    fields: [HTTP2HeaderField(":status", "200"), HTTP2HeaderField("content-type", "application/grpc")],
                    endStream: false
                ),
                .data(stream: 1, payload: body[...], endStream: false, endOffset: ends[0]),
                .data(stream: 1, payload: body[...], endStream: false, endOffset: ends[1]),
                .data(stream: 1, payload: [], endStream: true, endOffset: ends[2]),
            ]
        )
    }

    @Test("GOAWAY gives the last stream (the reserved bit cleared), the error code and the debug text, at most 256 bytes of it")
    func goaway() {
        let calm = Frames.frame(7, Frames.word(0x8000_0007) + Frames.word(11) + Array("too many pings".utf8))
        let long = Frames.frame(7, Frames.word(9) + Frames.word(2) + [UInt8](repeating: UInt8(ascii: "x"), count: 1000))
        let bare = Frames.frame(7, Frames.word(0) + Frames.word(0))
        let events = Frames.decode(Frames.settings() + calm + long + bare, sender: .server, chunk: 5)
        #expect(
            events == [
                .settings(ack: false, values: []),
                .goaway(lastStream: 7, code: 11, debug: "too many pings"),
                .goaway(lastStream: 9, code: 2, debug: String(repeating: "x", count: 256)),
                .goaway(lastStream: 0, code: 0, debug: ""),
            ]
        )
        #expect(HTTP2ErrorCode.name(11) == "ENHANCE_YOUR_CALM")
        #expect(HTTP2ErrorCode.name(2) == "INTERNAL_ERROR")
    }

    @Test(
        "frame types this version does not know, with any flags, stream and length, are skipped and the frames after them decode",
        arguments: [1, 4, 10_000]
    )
    func unknownTypes(chunk: Int) {
        let unknown =
            Frames.frame(0x0a, stream: 0, Array("h2=\":443\"".utf8))  // ALTSVC (RFC 7838)
            + Frames.frame(0xff, flags: 0xff, stream: 7, [UInt8](repeating: 0xee, count: 300))
            + Frames.frame(0x20, stream: 1, [])
            + Frames.frame(2, stream: 1, Frames.word(0) + [16])  // PRIORITY and WINDOW_UPDATE: nothing to report
            + Frames.frame(8, stream: 0, Frames.word(65_535))
        let bytes = Frames.preface + unknown + Frames.frame(6, Frames.word(0) + Frames.word(42)) + Frames.settings([(5, 32_768)])
        let events = Frames.decode(bytes, chunk: chunk)
        #expect(
            events == [
                .preface, .ping(ack: false, opaque: 42),
                .settings(ack: false, values: [HTTP2Setting(identifier: 5, value: 32_768)]),
            ]
        )
    }
}
