import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The HTTP/3 leg decoder on hand-built request streams, each cut at every offset: QPACK's static table, literals
/// (Huffman-coded too), dynamic-table lines counted, DATA payloads split into lines across frames, interim
/// responses, skipped frame types, unidirectional streams set aside, and what does not read.
@Suite("HTTP/3 decoder: request streams")
struct HTTP3DecoderTests {
    /// A frame: type, length, payload (types and lengths under 64: one-byte integers).
    static func frame(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        precondition(payload.count < 64)
        return [type, UInt8(payload.count)] + payload
    }

    /// A DATA frame whose length takes two bytes (a QUIC varint of 14 bits).
    static func longData(_ payload: [UInt8]) -> [UInt8] {
        [0x00, 0x40 | UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// A literal value after a name reference or name: not Huffman-coded, 7-bit length.
    static func literal(_ text: String) -> [UInt8] { [UInt8(text.utf8.count)] + bytes(text) }

    /// `count` × "w" Huffman-coded (RFC 7541 Appendix B: 'w' is 1111000), padded with ones.
    static func huffmanWs(_ count: Int) -> [UInt8] {
        var bits: [Bool] = []
        for _ in 0..<count { bits += [true, true, true, true, false, false, false] }
        while bits.count % 8 != 0 { bits.append(true) }
        return stride(from: 0, to: bits.count, by: 8).map { start in
            bits[start..<(start + 8)].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) }
        }
    }

    /// A request's HEADERS: POST (static 20), :path (static name 1) with a literal value, then `extra` field lines.
    static func request(_ path: String, extra: [UInt8] = []) -> [UInt8] {
        frame(0x01, [0x00, 0x00, 0xC0 | 20, 0x51] + literal(path) + extra)
    }

    /// What fresh decoders report for `bytes`, fed whole and cut in two at every offset: all must agree.
    static func decodeCut(upstream: Bool, _ bytes: [UInt8], session: () -> HTTP3Session = { HTTP3DecoderTests.requestSession() }) -> [Decoded] {
        let whole = Decoded.feed(HTTP3Decoder(upstream: upstream, session: session(), cap: 1 << 20), bytes)
        for cut in 1..<bytes.count {
            let decoder = HTTP3Decoder(upstream: upstream, session: session(), cap: 1 << 20)
            let seen = Decoded.feed(decoder, Array(bytes[..<cut])) + Decoded.feed(decoder, Array(bytes[cut...])).map { $0.shifted(by: cut) }
            #expect(seen == whole, "cut at \(cut)")
            if seen != whole { break }
        }
        let bytewise = Decoded.feed(HTTP3Decoder(upstream: upstream, session: session(), cap: 1 << 20), bytes, chunk: 1)
        #expect(bytewise == whole)
        return whole
    }

    /// A session whose client leg already opened a request (for the server's leg).
    static func requestSession() -> HTTP3Session {
        let session = HTTP3Session()
        session.kind = .request
        return session
    }

    @Test("the static table is RFC 9204's: 99 entries, :status 200 at 25, :status 100 at 63, x-frame-options sameorigin last")
    func staticTable() {
        #expect(QPACKStaticTable.entries.count == 99)
        func text(_ index: Int) -> String? { QPACKStaticTable.entry(index).map { "\($0.name): \($0.value)" } }
        #expect(text(0) == ":authority: ")
        #expect(text(25) == ":status: 200")
        #expect(text(63) == ":status: 100")
        #expect(text(85) == "content-security-policy: script-src 'none'; object-src 'none'; base-uri 'none'")
        #expect(text(98) == "x-frame-options: sameorigin")
        #expect(text(99) == nil)
    }

    @Test("field lines: indexed static, literal with a static name, literal names, Huffman values short and long, dynamic lines counted")
    func fieldSection() throws {
        let long = Self.huffmanWs(150)
        #expect(long.count == 132)
        // Required Insert Count 3, Delta Base -2: this section names the dynamic table.
        var section: [UInt8] = [0x03, 0x81]
        section += [0xC0 | 17]  // :method GET
        section += [0x51] + Self.literal("/feed?stream=a%20b")  // :path
        section += [0x80 | 2]  // indexed, dynamic: counted
        section += [0x20 | 3] + Self.bytes("x-k") + [0x83, 0xF1, 0xE3, 0xC7]  // literal name, Huffman value "www"
        section += [0x5F, 80, 0xFF, 0x05] + long  // user-agent (static 95: 15 + 80), Huffman, length 127 + 5
        section += [0x12]  // indexed with post-base index 2: counted
        section += [0x40 | 3] + Self.literal("v")  // literal with a dynamic name: counted
        section += [0x01] + Self.literal("v")  // literal with a post-base name: counted
        let read = try QPACKFieldSection(decoding: section)
        #expect(read.fields.map { $0.name } == [":method", ":path", "x-k", "user-agent"])
        #expect(read.value(":method") == "GET")
        #expect(read.value(":path") == "/feed?stream=a%20b")
        #expect(read.value("x-k") == "www")
        #expect(read.value("user-agent") == String(repeating: "w", count: 150))
        #expect(read.dynamicReferences == 4)
    }

    @Test("a section that does not read says why: a static index past the table, a truncated string, a Huffman code with EOS in it")
    func badSections() {
        for (section, reason) in [
            ([0x00, 0x00, 0xFF, 0x40] as [UInt8], "static table index 127"),
            ([0x00, 0x00, 0x51, 0x05, 0x61], "a string of 5 bytes, past the section's end"),
            ([0x00, 0x00, 0x51, 0x84, 0xFF, 0xFF, 0xFF, 0xFF], "Huffman-coded string of 4 bytes that does not decode"),
            ([0x00], "ends inside a field line"),
            // A string length padded with zero continuation bytes up to a shift that would overflow.
            ([0x00, 0x00, 0x51, 0x7F] + Array(repeating: 0x80, count: 9) + [0x7F], "an integer over 2^32"),
        ] {
            do {
                _ = try QPACKFieldSection(decoding: section)
                Issue.record("\(section) read")
            } catch {
                #expect(error.description.contains(reason), "\(error)")
            }
        }
    }

    @Test("a request stream: the request counted and recorded, each body line a message ending at its newline, across DATA frames")
    func requestStream() {
        let session = HTTP3Session()
        let head = Self.request("/lines?stream=c1", extra: [0x5F, 0x1D] + Self.literal("application/x-ndjson"))
        let first = Self.frame(0x00, Self.bytes("{\"seq\":1}\n{\"seq\":2"))
        let grease = Self.frame(0x21, [1, 2, 3])
        let second = Self.frame(0x00, Self.bytes("}\n"))
        let large = Self.longData(Array(repeating: UInt8(ascii: " "), count: 300) + Self.bytes("{\"seq\":3}\n"))
        let bytes = head + first + grease + second + large + Self.frame(0x00, Self.bytes("{\"seq\":"))
        let seen = Self.decodeCut(upstream: true, bytes, session: { HTTP3Session() })
        let body = head.count + 2
        let secondEnd = head.count + first.count + grease.count + second.count
        #expect(
            seen == [
                .event(.counted("h3Requests"), at: head.count),
                .event(.requestRead, at: head.count),
                .message("{\"seq\":1}", end: body + 10, binary: false),
                .message("{\"seq\":2}", end: secondEnd, binary: false),
                .message(String(repeating: " ", count: 300) + "{\"seq\":3}", end: secondEnd + large.count, binary: false),
            ]
        )
        let decoder = HTTP3Decoder(upstream: true, session: session, cap: 1 << 20)
        _ = Decoded.feed(decoder, bytes)
        #expect(decoder.hasPartialMessage)
        #expect(session.kind == .request)
        #expect(session.requestQuery("stream") == "c1")
        #expect(session.requestHeader("Content-Type") == "application/x-ndjson")
        #expect(session.requestHeader(":path") == "/lines?stream=c1")
    }

    @Test("a response: an interim status, then the final one and its body; trailers and DATA before a status are not the body")
    func responseStream() {
        let early = Self.frame(0x00, Self.bytes("{\"seq\":0}\n"))
        let interim = Self.frame(0x01, [0x00, 0x00, 0xFF, 0x00])
        let final = Self.frame(0x01, [0x00, 0x00, 0xC0 | 25])
        let data = Self.frame(0x00, Self.bytes("{\"seq\":1}\n"))
        let trailers = Self.frame(0x01, [0x00, 0x00, 0x80 | 1])
        let bytes = early + interim + final + data + trailers
        let seen = Self.decodeCut(upstream: false, bytes)
        let afterFinal = early.count + interim.count + final.count
        #expect(
            seen == [
                .event(.coded("h3Statuses", code: "100"), at: early.count + interim.count),
                .event(.coded("h3Statuses", code: "200"), at: afterFinal),
                .message("{\"seq\":1}", end: afterFinal + data.count, binary: false),
                .event(.counted("qpackDynamicFields"), at: bytes.count),
            ]
        )
    }

    @Test("unidirectional streams carry no messages: the client's control and QPACK streams, and any stream the server opened")
    func unidirectionalStreams() {
        let settings = [0x00] + Self.frame(0x04, [0x01, 0x40, 0x00, 0x07, 0x10]) + Self.frame(0x00, Self.bytes("{\"seq\":1}\n"))
        for type in [UInt8(0x00), 0x02, 0x03] {
            let session = HTTP3Session()
            let stream = [type] + Array(settings.dropFirst())
            #expect(Self.decodeCut(upstream: true, stream, session: { HTTP3Session() }) == [])
            _ = Decoded.feed(HTTP3Decoder(upstream: true, session: session, cap: 1 << 20), stream)
            #expect(session.kind == .unidirectional)
        }
        // A server's push or control stream: its leg reads first, with no request before it.
        let push = [0x01, 0x00] + Self.frame(0x01, [0x00, 0x00, 0xC0 | 25]) + Self.frame(0x00, Self.bytes("{\"seq\":1}\n"))
        #expect(Self.decodeCut(upstream: false, push, session: { HTTP3Session() }) == [])
    }

    @Test("what does not read ends the leg with a problem: a HEADERS frame over the bound, a section that does not decode, an overlong line")
    func problems() {
        let huge: [UInt8] = [0x01, 0x80, 0x20, 0x00, 0x00] + Self.bytes("x")
        #expect(
            Decoded.feed(HTTP3Decoder(upstream: true, session: HTTP3Session(), cap: 1 << 20), huge) == [
                .problem(.protocolError("an HTTP/3 HEADERS frame of 2097152 bytes, over the audit's 1 MiB bound"), at: 5)
            ]
        )
        let bad = Self.frame(0x01, [0x00, 0x00, 0xFF, 0x40]) + Self.frame(0x00, Self.bytes("{}\n"))
        let seen = Decoded.feed(HTTP3Decoder(upstream: true, session: HTTP3Session(), cap: 1 << 20), bad)
        #expect(seen.count == 1)
        if case .problem(.protocolError(let reason), at: 6) = seen.first {
            #expect(reason.contains("QPACK field section does not read: static table index 127"))
        } else {
            Issue.record("\(seen)")
        }
        let long = Self.request("/") + Self.longData(Array(repeating: UInt8(ascii: "x"), count: 200))
        let capped = Decoded.feed(HTTP3Decoder(upstream: true, session: HTTP3Session(), cap: 64), long)
        #expect(capped.last == .problem(.framing(.lineTooLong(200)), at: long.count))
    }
}
