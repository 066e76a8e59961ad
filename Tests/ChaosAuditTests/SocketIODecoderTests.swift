import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The Socket.IO leg decoder on hand-built Engine.IO v4 traffic, each stream cut at every offset: long-polling
/// requests and answers (payloads of packets separated by 0x1E, Content-Length and chunked), the upgrade to WebSocket
/// and its frames, events as messages, binary attachments, CONNECT auth, heartbeats, and bytes that are not it.
@Suite("Socket.IO decoder: Engine.IO packets over polling and WebSocket")
struct SocketIODecoderTests {
    typealias W = WebSocketWire

    static func get(_ query: String) -> [UInt8] {
        Array("GET /socket.io/?EIO=4&transport=polling&\(query) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
    }

    static func post(_ query: String, _ payload: String) -> [UInt8] {
        let body = Array(payload.utf8)
        return Array("POST /socket.io/?EIO=4&transport=polling&\(query) HTTP/1.1\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
    }

    static func answer(_ payload: String, chunked: Bool = false) -> [UInt8] {
        let body = Array(payload.utf8)
        guard chunked else { return Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body }
        var out = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        for start in stride(from: 0, to: body.count, by: 7) {
            let piece = body[start..<min(start + 7, body.count)]
            out += Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + Array("\r\n".utf8)
        }
        return out + Array("0\r\n\r\n".utf8)
    }

    /// What a fresh decoder reports for `bytes`, fed whole and cut in two at every offset: all must agree.
    static func decodeCut(upstream: Bool, _ bytes: [UInt8], cap: Int = 1 << 20) -> [Decoded] {
        let sessions = SocketIOSessions()
        let whole = Decoded.feed(SocketIODecoder(upstream: upstream, session: SocketIOSession(sessions: sessions), cap: cap), bytes)
        for cut in 1..<bytes.count {
            let decoder = SocketIODecoder(upstream: upstream, session: SocketIOSession(sessions: SocketIOSessions()), cap: cap)
            let seen = Decoded.feed(decoder, Array(bytes[..<cut])) + Decoded.feed(decoder, Array(bytes[cut...])).map { $0.shifted(by: cut) }
            #expect(seen == whole, "cut at \(cut)")
            if seen != whole { break }
        }
        return whole
    }

    /// How many times `seen` counts `name`.
    static func counted(_ seen: [Decoded], _ name: String) -> Int {
        seen.filter { if case .event(.counted(name), _) = $0 { true } else { false } }.count
    }

    static func messages(_ seen: [Decoded]) -> [String] {
        seen.compactMap { if case .message(let text, _, _) = $0 { text } else { nil } }
    }

    /// Thirty events `42["tick",{"seq":N}]` joined by 0x1E, compressed as python-engineio compresses a polling answer
    /// over 1 KB (gzip, with its mtime 0; and zlib for `deflate`): made with Python's gzip and zlib modules.
    static let compressedTicks: [String: String] = [
        "gzip":
            "1f8b08000000000002036dd1290e80401404d19b20be46d03dc37a15328a20088a8023dc1d34295beea5b2e7b8b6658ffa8e733d62d253aafc8fa69828668a2dc58e624f71a038525483154d4294502564095d42985026a4096d469bf917da8c36a3cd6833da8c36a3cd684b9fed054d236e338a020000",
        "deflate":
            "789c6dd1290e80401404d19b20be46d03dc37a15328a20088a8023dc1d34295beea5b2e7b8b6658ffa8e733d62d253aafc8fa69828668a2dc58e624f71a038525483154d4294502564095d42985026a4096d469bf917da8c36a3cd6833da8c36a3cd684b9fed059f7cc0af",
    ]

    @Test(
        "a polling answer in Content-Encoding gzip or deflate is inflated: every event of it is a message, however its bytes are cut",
        arguments: ["gzip", "deflate"]
    )
    func compressedAnswer(encoding: String) throws {
        let hex = try #require(Self.compressedTicks[encoding])
        let body = stride(from: 0, to: hex.count, by: 2).map { offset -> UInt8 in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
        let head = Array("HTTP/1.1 200 OK\r\nContent-Encoding: \(encoding)\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
        let bytes = head + body + Self.answer("42[\"tick\",{\"seq\":31}]")
        let expected = (1...31).map { "{\"0\":\"tick\",\"1\":{\"seq\":\($0)}}" }
        for piece in [bytes.count, 1, 5, 64] {
            let decoder = SocketIODecoder(upstream: false, session: SocketIOSession(sessions: SocketIOSessions()), cap: 1 << 20)
            var seen: [Decoded] = []
            for start in stride(from: 0, to: bytes.count, by: piece) {
                seen += Decoded.feed(decoder, Array(bytes[start..<min(bytes.count, start + piece)])).map { $0.shifted(by: start) }
            }
            #expect(Self.messages(seen) == expected, "\(encoding) in pieces of \(piece): \(Self.messages(seen).prefix(3))")
            // Each compressed event ends on the wire within the compressed body, the last one after it.
            let ends = seen.compactMap { if case .message(_, let end, _) = $0 { end } else { nil } }
            #expect(ends.prefix(30).allSatisfy { $0 > head.count && $0 <= head.count + body.count }, "\(ends.prefix(30))")
        }
    }

    @Test("long polling, the server's side: the open packet, then events as messages ending at their separator, a ping, an ok to a POST")
    func pollingAnswers() {
        let open = Self.answer(#"0{"sid":"s1","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":20000}"#)
        let events = Self.answer("42[\"tick\",{\"seq\":1}]\u{1e}42[\"tick\",{\"seq\":2}]\u{1e}2")
        let ok = Self.answer("ok")
        let bytes = open + events + ok
        let seen = Self.decodeCut(upstream: false, bytes)
        // 42["tick",{"seq":1}] is 20 bytes: the body is 20 + 1 + 20 + 1 + 1.
        let first = open.count + events.count - 43 + 20
        let expected: [Decoded] = [
            .event(.counted("eioOpens"), at: open.count),
            .message("{\"0\":\"tick\",\"1\":{\"seq\":1}}", end: first, binary: false),
            .message("{\"0\":\"tick\",\"1\":{\"seq\":2}}", end: first + 21, binary: false),
            .event(.keepalive(ack: false, opaque: 0), at: open.count + events.count),
        ]
        #expect(seen == expected)
    }

    @Test("a chunked answer: packets cross chunk boundaries, the last one ends with the last content byte")
    func chunkedAnswer() {
        let payload = "42[\"tick\",{\"seq\":1}]\u{1e}42[\"tick\",{\"seq\":2}]"
        let bytes = Self.answer(payload, chunked: true)
        let seen = Self.decodeCut(upstream: false, bytes)
        #expect(Self.messages(seen) == ["{\"0\":\"tick\",\"1\":{\"seq\":1}}", "{\"0\":\"tick\",\"1\":{\"seq\":2}}"])
        guard case .message(_, let end, _) = seen.last else {
            Issue.record("no last message: \(seen)")
            return
        }
        #expect(bytes[end - 1] == UInt8(ascii: "]"), "it ends at its own last byte, before the chunk's line end")
    }

    @Test("the client's side: requests are read (the stream in their query), a POST's CONNECT records its auth, pongs answer pings")
    func pollingRequests() {
        let handshake = Self.get("stream=c1")
        let connect = Self.post("sid=s1", "40{\"token\":\"t\",\"stream\":\"c9\"}\u{1e}3\u{1e}42[\"up\",{\"seq\":5}]")
        let seen = Self.decodeCut(upstream: true, handshake + connect)
        #expect(seen.contains(.event(.requestRead, at: handshake.count)))
        #expect(Self.counted(seen, "eioPolls") == 2 && Self.counted(seen, "sioConnects") == 1 && Self.counted(seen, "sioRecoveries") == 0)
        #expect(seen.contains { if case .event(.keepalive(ack: true, _), _) = $0 { true } else { false } })
        #expect(Self.messages(seen) == ["{\"0\":\"up\",\"1\":{\"seq\":5}}"])
        let session = SocketIOSession(sessions: SocketIOSessions())
        _ = Decoded.feed(SocketIODecoder(upstream: true, session: session, cap: 1024), handshake + connect)
        // The POST read last is the connection's request; its CONNECT's auth is the session's.
        #expect(session.requestQuery("sid") == "s1" && session.requestHeader("auth:stream") == "c9" && session.sid == "s1")
    }

    @Test("a later connection of the same session (its sid in the query) reads the handshake's query and the CONNECT's auth")
    func sessionAcrossConnections() {
        let sessions = SocketIOSessions()
        let first = SocketIOSession(sessions: sessions)
        _ = Decoded.feed(SocketIODecoder(upstream: true, session: first, cap: 1024), Self.get("stream=c1"))
        _ = Decoded.feed(SocketIODecoder(upstream: false, session: first, cap: 1024), Self.answer(#"0{"sid":"s7"}"#))
        let second = SocketIOSession(sessions: sessions)
        _ = Decoded.feed(SocketIODecoder(upstream: true, session: second, cap: 1024), Self.post("sid=s7", "40{\"room\":\"r2\"}"))
        let third = SocketIOSession(sessions: sessions)
        _ = Decoded.feed(SocketIODecoder(upstream: true, session: third, cap: 1024), Self.get("sid=s7"))
        #expect(third.requestQuery("stream") == "c1" && third.requestHeader("auth:room") == "r2")
    }

    @Test("the upgrade: the WebSocket's text messages are packets (probe, upgrade, events), a binary one is an attachment")
    func webSocketUpgrade() {
        let m = W.clientMask
        let request = W.request(target: "/socket.io/?EIO=4&transport=websocket&sid=s1", headers: [])
        let frames =
            W.text("2probe", mask: m) + W.text("5", mask: m) + W.text("42[\"up\",{\"seq\":1}]", mask: m)
            + W.text("451-[\"file\",{\"seq\":2},{\"_placeholder\":true,\"num\":0}]", mask: m) + W.frame(2, [1, 2, 3], mask: m)
            + W.text("42[\"up\",{\"seq\":3}]", mask: m) + W.text("3", mask: m)
        let seen = Self.decodeCut(upstream: true, request + frames)
        #expect(seen.contains(.event(.counted("eioProbes"), at: request.count + 12)))
        #expect(Self.counted(seen, "eioUpgrades") == 1)
        #expect(
            Self.messages(seen) == [
                "{\"0\":\"up\",\"1\":{\"seq\":1}}", "{\"0\":\"file\",\"1\":{\"seq\":2},\"2\":{\"_placeholder\":true,\"num\":0}}",
                "{\"0\":\"up\",\"1\":{\"seq\":3}}",
            ]
        )
        #expect(seen.last == .event(.keepalive(ack: true, opaque: 0), at: request.count + frames.count))
        let answer = W.response() + W.text("3probe") + W.text("42[\"tick\",{\"seq\":1}]") + W.text("2")
        let down = Self.decodeCut(upstream: false, answer)
        #expect(down.contains(.event(.counted("upgrades"), at: W.response().count)))
        #expect(
            Self.messages(down) == ["{\"0\":\"tick\",\"1\":{\"seq\":1}}"] && down.last == .event(.keepalive(ack: false, opaque: 0), at: answer.count)
        )
    }

    @Test("bytes that are not HTTP, and a packet of no Engine.IO type, stop the leg; a POST's ok is no payload; a 400 answer is counted by status")
    func problems() {
        let notHTTP = Decoded.feed(
            SocketIODecoder(upstream: false, session: SocketIOSession(sessions: SocketIOSessions()), cap: 64),
            Array("SSH-2.0\r\n\r\n".utf8)
        )
        #expect(notHTTP == [.problem(.protocolError("not an HTTP/1.1 status line: SSH-2.0"), at: 11)])
        let unknown = Self.decodeCut(upstream: false, Self.answer("6\u{1e}9oops"))
        #expect(unknown.last == .problem(.protocolError("an Engine.IO packet of no known type ('9')"), at: Self.answer("6\u{1e}9oops").count))
        // An answer that does not start with a packet type is not a payload (a POST's `ok`): skipped.
        #expect(Self.decodeCut(upstream: false, Self.answer("OK") + Self.answer("ok")).isEmpty)
        let page = Array(#"{"code":1,"message":"Session ID unknown"}"#.utf8)
        let refused = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: \(page.count)\r\n\r\n".utf8) + page
        let seen = Decoded.feed(SocketIODecoder(upstream: false, session: SocketIOSession(sessions: SocketIOSessions()), cap: 1024), refused)
        #expect(seen == [.event(.coded("eioRefusals", code: "400", proxyMayWrite: true), at: refused.count - page.count)])
    }

    @Test(
        "an event's array keyed by index: strings with brackets, commas and escaped quotes, nesting and spaces kept as written",
        arguments: [
            (#"["tick",{"seq":1}]"#, #"{"0":"tick","1":{"seq":1}}"#),
            (#" [ "a,]\"[" , [1,[2]] , {"k":"}"} ] "#, #"{"0":"a,]\"[","1":[1,[2]],"2":{"k":"}"}}"#),
            ("[]", "{}"),
        ]
    )
    func indexing(array: String, object: String) {
        var out: [UInt8] = []
        let made = Array(array.utf8).withUnsafeBufferPointer { JSONArrayIndexer.object(fromArray: $0, into: &out) }
        #expect(made && String(decoding: out, as: UTF8.self) == object)
    }

    @Test("paths only in the first argument: the decoder hands the arguments over in place from the first on, and the paths read it flat")
    func firstArgumentInPlace() {
        var spec = ProtocolSpec(framing: .socketio, seq: "1.seq", stream: "query:stream", ack: "1.meta.ack")
        #expect(SocketIOProtocol.readsFirstArgumentOnly(spec))
        let fields = SocketIOProtocol.fieldSpec(spec)
        #expect(fields.seq == "seq" && fields.stream == "query:stream" && fields.ack == "/meta/ack", "\(fields)")
        for other in [ProtocolSpec(framing: .socketio, seq: "1.seq", ignore: ["type": ["hello"]]), ProtocolSpec(framing: .socketio, seq: "2.seq")] {
            #expect(!SocketIOProtocol.readsFirstArgumentOnly(other), "the event name or a later argument: the array is indexed")
        }
        spec.stream = "1.stream"
        #expect(SocketIOProtocol.fieldSpec(spec).stream == "stream")
        let handshake = Self.get("stream=c1")
        let events = Self.post("sid=s1", "42[\"up\", {\"seq\":5,\"s\":\"[,]\"} ,3]\u{1e}42[\"bare\"]")
        let session = SocketIOSession(sessions: SocketIOSessions(), firstArgument: true)
        let seen = Decoded.feed(SocketIODecoder(upstream: true, session: session, cap: 1024), handshake + events)
        #expect(
            Self.messages(seen) == [#"{"seq":5,"s":"[,]"} ,3"#, #"["bare"]"#],
            "the arguments from the first on (not read through), and an event with no argument whole"
        )
        let third = Array(#"[1, {"a":[2,3]}, "x" ]"#.utf8).withUnsafeBufferPointer { JSONArrayIndexer.element(2, ofArray: $0) }
        #expect(third == 17..<20)
        let cases: [(String, String?)] = [
            (#" [ "a\"]" , {"seq":1} ] "#, #"{"seq":1}"#), (#"["tick",7]"#, "7"), (#"["tick"]"#, nil), (#"[3,{"seq":1}]"#, nil),
            (#"["tick",{"seq":1}"#, nil), (#"["x\\",{}, [1]]"#, #"{}, [1]"#), (#"["unterminated"#, nil),
        ]
        for (event, expected) in cases {
            let bytes = Array(event.utf8)
            let range = bytes.withUnsafeBufferPointer { JSONArrayIndexer.arguments(ofEvent: $0) }
            #expect(range.map { String(decoding: bytes[$0], as: UTF8.self) } == expected, "\(event)")
        }
    }

    @Test("what is not one JSON array is not indexed", arguments: [#"{"seq":1}"#, #"["open""#, "[1}", ""])
    func notAnArray(text: String) {
        var out: [UInt8] = []
        #expect(!Array(text.utf8).withUnsafeBufferPointer { JSONArrayIndexer.object(fromArray: $0, into: &out) })
    }

    @Test("paths read the event's array: 1.seq, 0 and event, a bare key in the first argument; auth:KEY from the session")
    func paths() {
        #expect(SocketIOProtocol.arrayPath("1.seq") == "/1/seq")
        #expect(SocketIOProtocol.arrayPath("2.meta.seq") == "/2/meta/seq")
        #expect(SocketIOProtocol.arrayPath("seq") == "/1/seq")
        #expect(SocketIOProtocol.arrayPath("event") == "/0" && SocketIOProtocol.arrayPath("type") == "/0")
        #expect(SocketIOProtocol.arrayPath("auth:stream") == "header:auth:stream")
        #expect(SocketIOProtocol.arrayPath("query:sid") == "query:sid" && SocketIOProtocol.arrayPath("/1/seq") == "/1/seq")
    }
}
