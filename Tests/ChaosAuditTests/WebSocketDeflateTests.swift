import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// permessage-deflate (RFC 7692) negotiated from the handshake: messages compressed with system zlib here are
/// inflated by the decoder, with and without context takeover, with a smaller window, fragmented and masked.
@Suite("WebSocket decoder: permessage-deflate")
struct WebSocketDeflateTests {
    typealias W = WebSocketWire

    static let messages = (1...6).map { "{\"type\":\"MSG\",\"stream\":\"c1\",\"seq\":\($0),\"payload\":\"\(String(repeating: "x", count: 40))\"}" }

    /// A connection whose server accepted `extensions`: the downstream leg after the response, and the session.
    static func downstream(_ extensions: String) -> (WebSocketDecoder, [UInt8]) {
        let session = WebSocketSession()
        return (WebSocketDecoder(upstream: false, session: session, cap: 1 << 20), W.response(extensions: extensions))
    }

    @Test(
        "server messages with and without context takeover, and with a 10-bit window, inflate to what was sent",
        arguments: [
            ("permessage-deflate", true, Int32(15)),
            ("permessage-deflate; server_no_context_takeover", false, 15),
            ("permessage-deflate; server_max_window_bits=10; client_max_window_bits", true, 10),
            ("permessage-deflate; server_no_context_takeover; server_max_window_bits=\"9\"", false, 9),
        ]
    )
    func serverMessages(extensions: String, takeover: Bool, bits: Int32) {
        let (decoder, head) = Self.downstream(extensions)
        let deflater = Deflater(bits: bits, takeover: takeover)
        var bytes = head
        for message in Self.messages { bytes += W.frame(1, deflater.compress(Array(message.utf8)), rsv1: true) }
        let texts = Decoded.feed(decoder, bytes).compactMap { if case .message(let text, _, _) = $0 { text } else { nil } }
        #expect(texts == Self.messages)
        #expect(decoder.session.deflate?.serverNoContextTakeover == !takeover)
    }

    @Test("with context takeover, later messages refer back to earlier ones: inflating them as separate streams would fail")
    func takeoverIsReallyShared() {
        let deflater = Deflater(takeover: true)
        let first = deflater.compress(Array(Self.messages[0].utf8))
        let second = deflater.compress(Array(Self.messages[0].utf8))
        #expect(second.count < first.count / 2, "the repeat is a back-reference into the previous message")
        // Negotiated without context takeover, the second message refers to a window the decoder reset: a problem.
        let (decoder, head) = Self.downstream("permessage-deflate; server_no_context_takeover")
        let seen = Decoded.feed(decoder, head + W.frame(1, first, rsv1: true) + W.frame(1, second, rsv1: true))
        guard case .problem(.protocolError(let reason), _) = seen.last else {
            Issue.record("\(seen)")
            return
        }
        #expect(reason.contains("does not inflate"))
    }

    @Test("a compressed client message, masked and fragmented into three frames with a ping between, inflates whole")
    func fragmentedMaskedClientMessage() {
        let session = WebSocketSession()
        let serverLeg = WebSocketDecoder(upstream: false, session: session, cap: 1 << 20)
        _ = Decoded.feed(serverLeg, W.response(extensions: "permessage-deflate; client_no_context_takeover"))
        let decoder = WebSocketDecoder(upstream: true, session: session, cap: 1 << 20)
        let big = String((0..<20_000).map { "\($0 % 97)," }.joined().prefix(70_000))
        let compressed = Deflater(takeover: false).compress(Array(big.utf8))
        let third = compressed.count / 3
        let m = W.clientMask
        let bytes =
            W.request() + W.frame(2, Array(compressed[..<third]), fin: false, rsv1: true, mask: m)
            + W.frame(9, [], mask: m) + W.frame(0, Array(compressed[third..<(2 * third)]), fin: false, mask: m)
            + W.frame(0, Array(compressed[(2 * third)...]), mask: m)
        for chunk in [nil, 5, 1000] as [Int?] {
            let fresh = WebSocketDecoder(upstream: true, session: session, cap: 1 << 20)
            let seen = Decoded.feed(fresh, bytes, chunk: chunk)
            #expect(seen.last == .message(big, end: bytes.count, binary: true), "chunk \(chunk ?? 0)")
        }
        _ = decoder
    }

    @Test("a message that inflates past the cap is oversized, and the next one still inflates (the window stays in step)")
    func inflatedPastCap() {
        let session = WebSocketSession()
        let decoder = WebSocketDecoder(upstream: false, session: session, cap: 4096)
        let deflater = Deflater(takeover: true)
        let bomb = [UInt8](repeating: 0x7B, count: 1 << 20)
        let bytes =
            W.response(extensions: "permessage-deflate") + W.frame(2, deflater.compress(bomb), rsv1: true)
            + W.frame(1, deflater.compress(Array(Self.messages[1].utf8)), rsv1: true)
        let seen = Decoded.feed(decoder, bytes)
        #expect(seen.count == 3)
        if case .event(.oversized(let size, _), _) = seen[1] { #expect(size == 1 << 20) } else { Issue.record("\(seen)") }
        #expect(seen.last == .message(Self.messages[1], end: bytes.count, binary: false))
        #expect(decoder.bufferedCapacity < 64 * 1024)
    }

    @Test(
        "the negotiation is read from the server's answer",
        arguments: [
            (
                "permessage-deflate; client_max_window_bits=12; server_no_context_takeover",
                PerMessageDeflate(serverNoContextTakeover: true, clientMaxWindowBits: 12)
            ),
            ("x-webkit-deflate-frame, permessage-deflate", PerMessageDeflate()),
        ]
    )
    func negotiation(header: String, expected: PerMessageDeflate) {
        #expect(PerMessageDeflate(accepted: header) == expected)
        #expect(PerMessageDeflate(accepted: "permessage-deflate; server_max_window_bits=16") == nil)
        #expect(PerMessageDeflate(accepted: "permessage-deflate; unknown=1") == nil)
    }
}
