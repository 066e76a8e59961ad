import Testing

@testable import ChaosProtocols

@Suite("HTTP/2 decoding stops with one protocol error: frames over SETTINGS_MAX_FRAME_SIZE, HPACK it cannot decode, TLS")
struct HTTP2DecoderErrorTests {
    private static func protocolErrors(_ events: [HTTP2Event]) -> [(offset: Int64, reason: String)] {
        events.compactMap { if case .protocolError(let offset, let reason) = $0 { (offset, reason) } else { nil } }
    }

    @Test("a frame over SETTINGS_MAX_FRAME_SIZE is one protocol error at its first byte, found from its header alone")
    func frameTooLarge() {
        let head = Frames.preface + Frames.settings()
        let big = Frames.data(stream: 1, [UInt8](repeating: 3, count: 20_000))
        let reason = "a DATA frame of 20000 bytes, over SETTINGS_MAX_FRAME_SIZE (16384)"
        for chunk in [1, 9, 1000, head.count + big.count] {
            let events = Frames.decode(head + big + Frames.settings(), chunk: chunk)
            #expect(events.count == 3, "chunk \(chunk)")
            #expect(Array(events.prefix(2)) == [.preface, .settings(ack: false, values: [])])
            #expect(events.last == .protocolError(offset: Int64(head.count), reason: reason), "chunk \(chunk)")
        }
        // The header alone is enough: the payload is not waited for.
        var decoder = HTTP2DirectionDecoder(sender: .client)
        let headerOnly = head + big.prefix(9)
        #expect(headerOnly.withUnsafeBytes { decoder.feed($0) }.last == .protocolError(offset: Int64(head.count), reason: reason))
        #expect(decoder.failed)
    }

    @Test("the limit holds for every frame type and lets a frame of exactly 16,384 bytes through")
    func frameSizeBoundary() {
        let exact = Frames.frame(0xfa, stream: 1, [UInt8](repeating: 0, count: 16_384))
        let over = Frames.frame(0xfa, stream: 1, [UInt8](repeating: 0, count: 16_385))
        let events = Frames.decode(Frames.preface + exact + Frames.frame(6, Frames.word(0) + Frames.word(1)) + over)
        #expect(
            events == [
                .preface, .ping(ack: false, opaque: 1),
                .protocolError(
                    offset: Int64(24 + exact.count + 17),
                    reason: "a type 0xfa frame of 16385 bytes, over SETTINGS_MAX_FRAME_SIZE (16384)"
                ),
            ]
        )
        let headers = Frames.decode(Frames.preface + Frames.frame(1, flags: 0x4, stream: 1, [UInt8](repeating: 0x82, count: 16_385)))
        #expect(Self.protocolErrors(headers).map(\.reason) == ["a HEADERS frame of 16385 bytes, over SETTINGS_MAX_FRAME_SIZE (16384)"])
    }

    @Test("with maxFrameSize raised to 1 MiB, set between feeds as the peer's SETTINGS allow, the same frame decodes")
    func frameSizeRaised() {
        let payload = [UInt8](repeating: 3, count: 20_000)
        let big = Frames.data(stream: 1, payload, endStream: true)
        let head = Frames.preface + Frames.settings()
        let end = Int64(head.count + big.count)
        #expect(
            Frames.decode(head + big, chunk: 777, maxFrameSize: 1 << 20)
                == [.preface, .settings(ack: false, values: []), .data(stream: 1, payload: payload[...], endStream: true, endOffset: end)]
        )
        var decoder = HTTP2DirectionDecoder(sender: .client)
        #expect(decoder.maxFrameSize == 16_384)
        #expect(head.withUnsafeBytes { decoder.feed($0) } == [.preface, .settings(ack: false, values: [])])
        decoder.maxFrameSize = 1 << 20
        #expect(big.withUnsafeBytes { decoder.feed($0) } == [.data(stream: 1, payload: payload[...], endStream: true, endOffset: end)])
        #expect(!decoder.failed)
    }

    @Test(
        "a header block naming an HPACK index that does not exist is one protocol error, and nothing after it is decoded",
        arguments: [[0x80], [0xbe], [0x82, 0xc6], [0xff, 0x00]] as [[UInt8]]
    )  // index 0; 62, 70 and 127 with an empty table
    func invalidIndex(block: [UInt8]) {
        var encoder = Frames.Encoder()
        let head = Frames.preface + Frames.settings()
        let after =
            Frames.frame(1, flags: 0x4, stream: 3, encoder.block([(":method", "GET"), (":path", "/")]))
            + Frames.data(stream: 3, [1]) + Frames.settings()
        for chunk in [1, 1000] {
            let events = Frames.decode(head + Frames.frame(1, flags: 0x4, stream: 1, block) + after, chunk: chunk)
            #expect(events.count == 3, "\(events)")
            #expect(Array(events.prefix(2)) == [.preface, .settings(ack: false, values: [])])
            let errors = Self.protocolErrors(events)
            #expect(errors.count == 1)
            #expect(errors.first?.offset == Int64(head.count))
            #expect(errors.first?.reason.hasPrefix("a header block HPACK cannot decode") == true, "\(errors)")
        }
    }

    @Test(
        "TLS where cleartext HTTP/2 was declared is one protocol error that says so, however the bytes are cut",
        arguments: [
            (HTTP2DirectionDecoder.Sender.client, Frames.tlsHandshake(1), "a ClientHello"),
            (.server, Frames.tlsHandshake(2).enumerated().map { $0.offset == 2 ? 0x03 : $0.element }, "a ServerHello"),
            (.server, [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46], "an alert"),
        ] as [(HTTP2DirectionDecoder.Sender, [UInt8], String)]
    )
    func tls(sender: HTTP2DirectionDecoder.Sender, bytes: [UInt8], what: String) {
        for chunk in [1, 5, bytes.count] {
            let events = Frames.decode(bytes + Frames.settings(), sender: sender, chunk: chunk)
            #expect(
                events == [
                    .protocolError(
                        offset: 0,
                        reason: "this is TLS (\(what)), not cleartext HTTP/2: "
                            + "chaos audits h2c only (prior knowledge or the h2c upgrade)"
                    )
                ],
                "chunk \(chunk)"
            )
        }
    }
}
