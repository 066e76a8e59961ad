import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The SSE leg decoder on hand-built HTTP/1.1 bytes, each cut at every offset: events, chunked bodies, CRLF and
/// CR line ends, multi-line data, comments, `retry`, a response that is not an event stream, `Last-Event-ID`.
@Suite("SSE decoder: events")
struct SSEDecoderTests {
    static func request(_ target: String = "/events?s=c1", headers: [String] = []) -> [UInt8] {
        Array((["GET \(target) HTTP/1.1", "Host: x"] + headers).joined(separator: "\r\n").utf8) + Array("\r\n\r\n".utf8)
    }

    static func response(status: String = "200 OK", type: String = "text/event-stream; charset=utf-8", chunked: Bool = false) -> [UInt8] {
        Array("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\n\(chunked ? "Transfer-Encoding: chunked\r\n" : "")\r\n".utf8)
    }

    /// `bytes` as chunks of transfer-encoding, cut into pieces of `size` bytes, then the last chunk.
    static func chunked(_ bytes: [UInt8], size: Int) -> [UInt8] {
        var out: [UInt8] = []
        for start in stride(from: 0, to: bytes.count, by: size) {
            let piece = bytes[start..<min(start + size, bytes.count)]
            out += Array("\(String(piece.count, radix: 16));ext=1\r\n".utf8) + piece + Array("\r\n".utf8)
        }
        return out + Array("0\r\nX-Trailer: t\r\n\r\n".utf8)
    }

    /// What a fresh decoder reports for `bytes`, fed whole and cut in two at every offset: all must agree.
    static func decodeCut(upstream: Bool, _ bytes: [UInt8], cap: Int = 1 << 20, wholeEvent: Bool = false) -> [Decoded] {
        let whole = Decoded.feed(SSEDecoder(upstream: upstream, session: SSESession(wholeEvent: wholeEvent), cap: cap), bytes)
        for cut in 1..<bytes.count {
            let decoder = SSEDecoder(upstream: upstream, session: SSESession(wholeEvent: wholeEvent), cap: cap)
            let seen = Decoded.feed(decoder, Array(bytes[..<cut])) + Decoded.feed(decoder, Array(bytes[cut...])).map { $0.shifted(by: cut) }
            #expect(seen == whole, "cut at \(cut)")
            if seen != whole { break }
        }
        return whole
    }

    @Test("events end at the line end of their blank line; data lines join with LF; comments and unknown fields are ignored")
    func events() {
        let head = Self.response()
        let first = ": hello\nid: 1\nevent: tick\ndata: {\"seq\":1,\ndata:  \"x\":2}\n\n"
        let second = "retry: 3000\nfoo: bar\ndata: {\"seq\":2}\n\n"
        let bytes = head + Array((first + second + "data: partial\n").utf8)
        let seen = Self.decodeCut(upstream: false, bytes)
        let firstEnd: Int = head.count + first.utf8.count
        let secondEnd: Int = firstEnd + second.utf8.count
        let expected: [Decoded] = [
            .event(.counted("sseStreams"), at: head.count),
            .message("{\"seq\":1,\n \"x\":2}", end: firstEnd, binary: false),
            .event(.counted("sseRetries"), at: firstEnd + 12),
            .message("{\"seq\":2}", end: secondEnd, binary: false),
        ]
        #expect(seen == expected)
    }

    @Test("format: text sees the whole event as written (its field lines, comments left out), so a regex can read its id")
    func wholeEvent() {
        let head = Self.response()
        // The blank line ends at its CR, before its LF and the 7 bytes of an event with no data (never a message).
        let event = ": c\r\nid: 7\r\nevent: tick\r\ndata: {\"seq\":1}\r\ndata:x\r\n\r\nid: 8\n\n"
        let seen = Self.decodeCut(upstream: false, head + Array(event.utf8), wholeEvent: true)
        #expect(
            seen == [
                .event(.counted("sseStreams"), at: head.count),
                .message("id: 7\nevent: tick\ndata: {\"seq\":1}\ndata:x", end: head.count + event.utf8.count - 8, binary: false),
            ]
        )
    }

    @Test("CRLF and CR line ends: the event ends at its blank line's CR (where a client dispatches it)")
    func lineEnds() {
        let head = Self.response()
        let crlf = "data: a\r\n\r\n"
        let cr = "data: b\r\rdata: c\r\n\r\n"
        let bytes = head + Array((crlf + cr).utf8)
        let seen = Self.decodeCut(upstream: false, bytes)
        let base = head.count + crlf.utf8.count
        #expect(
            seen == [
                .event(.counted("sseStreams"), at: head.count), .message("a", end: base - 1, binary: false),
                .message("b", end: base + 9, binary: false), .message("c", end: bytes.count - 1, binary: false),
            ]
        )
    }

    @Test("a chunked body: events cross chunk boundaries; the trailer ends the response and the next one is read")
    func chunkedBody() {
        let events = Array("id: 7\ndata: {\"seq\":1}\n\ndata: {\"seq\":2}\n\n".utf8)
        let body = Self.chunked(events, size: 5)
        let head = Self.response(chunked: true)
        let next = Array("HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\n\r\ndata: no\n\n\n\n".utf8)
        let bytes: [UInt8] = head + body + next
        let seen = Self.decodeCut(upstream: false, bytes)
        let messages: [String] = seen.compactMap { if case .message(let text, _, _) = $0 { text } else { nil } }
        #expect(messages == ["{\"seq\":1}", "{\"seq\":2}"])
        let refused: Decoded = .event(.counted("sseRefused"), at: bytes.count - 12)
        #expect(seen.last == refused)
        // The first event ends at the chunk holding its blank line's LF (chunks of 5 bytes, 10-byte size lines).
        guard case .message(_, let end, _) = seen[1] else {
            Issue.record("no first message")
            return
        }
        #expect(bytes[end - 1] == 10 && bytes[end - 2] == 10)
    }

    @Test("a response that is not an event stream carries no messages; nor does a non-200 event stream")
    func notEventStream() {
        for head in [Self.response(type: "application/json"), Self.response(status: "500 Oops")] {
            let bytes = head + Array("data: {\"seq\":1}\n\n".utf8)
            #expect(Self.decodeCut(upstream: false, bytes) == [.event(.counted("sseRefused"), at: head.count)])
        }
    }

    @Test("the request's target and headers go to the session; Last-Event-ID is a resume; a body is skipped")
    func request() {
        let first = Self.request(headers: ["X-Stream: s1", "Last-Event-ID: 41"])
        let post = Array("POST /ack HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello".utf8)
        let bytes = first + post
        #expect(
            Self.decodeCut(upstream: true, bytes) == [
                .event(.requestRead, at: first.count), .event(.counted("sseResumes"), at: first.count),
                .event(.requestRead, at: first.count + post.count - 5),
            ]
        )
        let session = SSESession()
        _ = Decoded.feed(SSEDecoder(upstream: true, session: session, cap: 1024), bytes)
        #expect(
            session.requestQuery("s") == "c1" && session.requestHeader("x-stream") == "s1"
                && session.requestHeader("Last-Event-ID") == "41"
        )
    }

    @Test("bytes that are not HTTP/1.1 and bad chunk sizes are protocol problems")
    func problems() {
        let notHTTP = Decoded.feed(SSEDecoder(upstream: false, session: SSESession(), cap: 64), Array("SSH-2.0\r\n\r\n".utf8))
        #expect(notHTTP == [.problem(.protocolError("not an HTTP/1.1 status line: SSH-2.0"), at: 11)])
        let head = Self.response(chunked: true)
        let badChunk = Decoded.feed(SSEDecoder(upstream: false, session: SSESession(), cap: 64), head + Array("zz\r\n".utf8))
        #expect(badChunk.last == .problem(.protocolError("not a chunk size: byte 122 in a chunk-size line"), at: head.count))
    }

    @Test("an event over the cap is counted as oversized, not kept; the decoder's buffers stay bounded")
    func oversized() {
        let head = Self.response()
        let big = "data: " + String(repeating: "x", count: 5000) + "\ndata: y\n\n"
        let bytes = head + Array((big + "data: {\"seq\":3}\n\n").utf8)
        let decoder = SSEDecoder(upstream: false, session: SSESession(), cap: 100)
        let seen = Decoded.feed(decoder, bytes, chunk: 7)
        let end = head.count + big.utf8.count
        #expect(
            seen == [
                .event(.counted("sseStreams"), at: head.count), .event(.oversized(bytes: 5002, end: end), at: end),
                .message("{\"seq\":3}", end: bytes.count, binary: false),
            ]
        )
        #expect(decoder.bufferedCapacity < 1024)
    }
}

extension Decoded {
    /// The same output with its positions moved by `offset` (for bytes fed after `offset` others).
    func shifted(by offset: Int) -> Decoded {
        switch self {
        case .message(let text, let end, let binary): .message(text, end: end + offset, binary: binary)
        case .event(.oversized(let bytes, let end), let at): .event(.oversized(bytes: bytes, end: end + offset), at: at + offset)
        case .event(let event, let at): .event(event, at: at + offset)
        case .problem(let problem, let at): .problem(problem, at: at + offset)
        }
    }
}
