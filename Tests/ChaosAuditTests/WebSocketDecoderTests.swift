import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The WebSocket leg decoder on hand-built frames (RFC 6455): lengths, masking, fragmentation, control frames,
/// bytes that are not WebSocket, and memory that stays bounded whatever a header claims.
@Suite("WebSocket decoder: frames")
struct WebSocketDecoderTests {
    typealias W = WebSocketWire

    /// A downstream (server → client) leg after its 101 response, and where the frames start.
    static func server(cap: Int = 16 << 20, session: WebSocketSession = WebSocketSession()) -> (WebSocketDecoder, [UInt8]) {
        (WebSocketDecoder(upstream: false, session: session, cap: cap), W.response())
    }

    static func client(session: WebSocketSession = WebSocketSession()) -> (WebSocketDecoder, [UInt8]) {
        (WebSocketDecoder(upstream: true, session: session, cap: 16 << 20), W.request())
    }

    @Test(
        "every length form: 7-bit, 16-bit and 64-bit lengths, each message ending where its frame ends",
        arguments: [0, 1, 125, 126, 127, 65_535, 65_536, 70_000]
    )
    func lengths(size: Int) {
        let (decoder, head) = Self.server()
        let body = String(repeating: "a", count: size)
        let bytes = head + W.text(body) + W.frame(2, Array("tail".utf8))
        let seen = Decoded.feed(decoder, bytes)
        let firstEnd = head.count + W.text(body).count
        #expect(
            seen == [
                .event(.counted("upgrades"), at: head.count), .message(body, end: firstEnd, binary: false),
                .message("tail", end: bytes.count, binary: true),
            ]
        )
    }

    @Test("client frames are unmasked; an unmasked client frame is a protocol problem")
    func masking() {
        let (decoder, head) = Self.client()
        let frame = W.frame(1, Array("{\"seq\":1}".utf8), mask: W.clientMask)
        #expect(
            Decoded.feed(decoder, head + frame) == [
                .event(.requestRead, at: head.count),
                .message("{\"seq\":1}", end: head.count + frame.count, binary: false),
            ]
        )
        let (strict, _) = Self.client()
        let seen = Decoded.feed(strict, head + W.text("plain"))
        #expect(
            seen.last
                == .problem(
                    .protocolError("an unmasked frame from the client (RFC 6455 5.1: every client frame is masked)"),
                    at: head.count + 2
                )
        )
        #expect(strict.phase == .stopped)
    }

    @Test(
        "a long masked message unmasks right whatever the reads' sizes: eight bytes at a time from any key position",
        arguments: [1, 3, 5, 7, 8, 13, 4_096]
    )
    func maskedAcrossReads(chunk: Int) {
        let (decoder, head) = Self.client()
        let body = (0..<1_003).map { "{\"seq\":\($0)}"[...].utf8.map { Character(Unicode.Scalar($0)) } }.joined().prefix(1_003)
        let text = String(body)
        let frame = W.frame(1, Array(text.utf8), mask: W.clientMask)
        let seen = Decoded.feed(decoder, head + frame + W.frame(1, Array("tail".utf8), mask: W.clientMask), chunk: chunk)
        #expect(seen.dropFirst().first == .message(text, end: head.count + frame.count, binary: false))
        #expect(seen.last.map { if case .message("tail", _, false) = $0 { true } else { false } } == true)
    }

    @Test("a fragmented message with a ping and a pong between its frames is one message, ending at its last frame")
    func fragmentation() {
        let (decoder, head) = Self.client()
        let m = W.clientMask
        let bytes =
            head + W.frame(1, Array("{\"seq\":".utf8), fin: false, mask: m) + W.frame(9, Array("hb".utf8), mask: m)
            + W.frame(0, Array("4".utf8), fin: false, mask: m) + W.frame(10, [], mask: m) + W.frame(0, Array("2}".utf8), mask: m)
        let seen = Decoded.feed(decoder, bytes)
        let pingEnd = head.count + 13 + 8
        #expect(
            seen == [
                .event(.requestRead, at: head.count), .event(.counted("pings"), at: pingEnd),
                .event(.counted("pongs"), at: pingEnd + 7 + 6), .message("{\"seq\":42}", end: bytes.count, binary: false),
            ]
        )
    }

    @Test("a close frame gives its code and reason, and ends decoding; one without a payload has no code")
    func close() {
        let (decoder, head) = Self.server()
        let bytes = head + W.close(1012, "service restart") + W.text("after close")
        let seen = Decoded.feed(decoder, bytes)
        #expect(seen.last == .event(.coded("closeCodes", code: "1012"), at: head.count + 19))
        #expect(decoder.phase == .closed)
        let (bare, _) = Self.server()
        #expect(Decoded.feed(bare, head + W.frame(8, [])).last == .event(.coded("closeCodes", code: "none"), at: head.count + 2))
    }

    @Test(
        "bad frames are protocol problems at their offset, with a reason",
        arguments: [
            (WebSocketWire.frame(0, Array("x".utf8)), "a continuation frame with no fragmented message to continue"),
            (WebSocketWire.frame(3, []), "reserved opcode 3"),
            (WebSocketWire.frame(9, [], fin: false), "a fragmented control frame"),
            (WebSocketWire.frame(9, Array(repeating: 1, count: 126)), "a control frame of 126 bytes (at most 125)"),
            (WebSocketWire.frame(1, Array("x".utf8), rsv1: true), "RSV1 (compressed) set, but permessage-deflate was not negotiated"),
            (
                WebSocketWire.frame(1, [], mask: WebSocketWire.clientMask),
                "a masked frame from the server (RFC 6455 5.1: server frames are never masked)"
            ),
            (WebSocketWire.frame(1, Array("ab".utf8), fin: false) + WebSocketWire.text("c"), "a new data frame inside a fragmented message"),
        ]
    )
    func badFrames(frame: [UInt8], reason: String) {
        let (decoder, head) = Self.server()
        let seen = Decoded.feed(decoder, head + frame + W.text("never read"))
        guard case .problem(.protocolError(let found), let at) = seen.last else {
            Issue.record("no problem: \(seen)")
            return
        }
        #expect(found == reason)
        #expect(at > head.count && at <= head.count + frame.count)
    }

    @Test("garbage after the handshake, or instead of it, stops the leg with a problem and never crashes")
    func garbage() {
        let (decoder, head) = Self.server()
        var noise = SeededBytes(seed: 7)
        let garbage = (0..<4096).map { _ in noise.next() }
        let seen = Decoded.feed(decoder, head + [0xFF, 0xFF] + garbage, chunk: 100)
        #expect(seen.count == 2)
        if case .problem(.protocolError, let at) = seen.last { #expect(at == head.count + 14) } else { Issue.record("\(seen)") }
        let (notHTTP, _) = Self.client()
        let first = Decoded.feed(notHTTP, Array("{\"seq\":1}\n".utf8))
        #expect(first == [.problem(.protocolError("not a WebSocket upgrade request: the bytes do not start with 'GET '"), at: 0)])
        let (refused, _) = Self.server()
        #expect(
            Decoded.feed(refused, W.response(status: "403 Forbidden") + garbage).last
                == .event(.counted("upgradeFailures"), at: W.response(status: "403 Forbidden").count)
        )
    }

    @Test("a 100 MB frame header allocates nothing near 100 MB: the message is counted as oversized")
    func hugeFrame() {
        let (decoder, head) = Self.server(cap: 1 << 20)
        let size = 100_000_000
        var seen = Decoded.feed(decoder, head + W.frame(2, [], length: UInt64(size)))
        let chunk = [UInt8](repeating: 0x61, count: 1 << 16)
        var fed = 0
        var largest = 0
        while fed < size {
            let piece = min(chunk.count, size - fed)
            seen += Decoded.feed(decoder, Array(chunk[..<piece]))
            fed += piece
            largest = max(largest, decoder.bufferedCapacity)
        }
        #expect(largest < 64 * 1024, "the decoder held \(largest) bytes")
        guard case .event(.oversized(let bytes, _), _) = seen.last else {
            Issue.record("\(seen.suffix(2))")
            return
        }
        #expect(bytes == size)
        #expect(Decoded.feed(decoder, W.text("next")).map { if case .message(let text, _, _) = $0 { text } else { "" } } == ["next"])
    }

    @Test(
        "feeding a byte at a time, or in any chunks, gives exactly what feeding everything at once gives",
        arguments: [1, 2, 3, 7, 64, 1000]
    )
    func chunking(size: Int) {
        let m = W.clientMask
        let bytes =
            W.request() + W.frame(1, Array("{\"seq\":1}".utf8), mask: m)
            + W.frame(2, Array(repeating: 0x42, count: 300), fin: false, mask: m) + W.frame(9, Array("p".utf8), mask: m)
            + W.frame(0, Array(repeating: 0x43, count: 70_000), mask: m) + W.frame(1, [], mask: m) + W.close(1000, "bye", mask: m)
        let whole = Decoded.feed(WebSocketDecoder(upstream: true, session: WebSocketSession(), cap: 1 << 20), bytes)
        let pieces = Decoded.feed(WebSocketDecoder(upstream: true, session: WebSocketSession(), cap: 1 << 20), bytes, chunk: size)
        #expect(whole.count == 7)  // 4 messages (one of them empty), the ping, the close frame: closing, then its code
        #expect(pieces == whole)
    }
}

/// Deterministic noise for garbage inputs.
struct SeededBytes {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt8 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}
