import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// `events:` and `namespaces:` of `framing: socketio`: only the EVENTs of the listed names in the listed namespaces are
/// messages; the others are counted (`sioUnauditedEvents`), never judged, however the paths read the event.
@Suite("Socket.IO events: and namespaces:")
struct SocketIOEventFilterTests {
    typealias W = WebSocketWire

    /// One WebSocket-only connection whose server emits, for seqs 1...4, `tick` and `chat` in the main namespace and
    /// `tick` in `/admin` (each with its own seqs), and one event with no name.
    static func audit(_ lists: [String: [String]]?, stream: String) throws -> AuditResult {
        var spec = ProtocolSpec(framing: .socketio, seq: "1.seq", stream: stream)
        spec.lists = lists
        var s = TrafficScript()
        s.open(1)
        let up = W.request(target: "/socket.io/?EIO=4&transport=websocket&stream=c1", headers: []) + W.text("40", mask: W.clientMask)
        s.sendBytes(1, .upstream, up)
        s.deliverBytes(1, .upstream, up)
        var down = W.response() + W.text(#"40{"sid":"x"}"#)
        for seq in 1...4 {
            down += W.text(#"42["tick",{"seq":\#(seq),"s":"tick"}]"#)
            down += W.text(#"42["chat",{"seq":\#(seq * 10),"s":"chat"}]"#)
            down += W.text(#"42/admin,["tick",{"seq":\#(seq * 100),"s":"admin"}]"#)
        }
        down += W.text(#"42[7,{"seq":1000,"s":"odd"}]"#)
        s.sendBytes(1, .downstream, down)
        s.deliverBytes(1, .downstream, down)
        s.close(1)
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        return engine.finish()
    }

    @Test(
        "only the listed names in the listed namespaces are messages, the rest counted; with no list every event is one",
        arguments: [
            ([String: [String]]?.none, 13, 0),
            (["events": ["tick"]], 8, 5),
            (["events": ["tick"], "namespaces": ["/"]], 4, 9),
            (["namespaces": ["/admin"]], 4, 9),
            (["events": ["chat", "tick"], "namespaces": ["/", "/admin"]], 12, 1),
        ]
    )
    func filtered(lists: [String: [String]]?, messages: Int64, unaudited: Int64) throws {
        for stream in ["1.s", "query:stream"] {
            let result = try Self.audit(lists, stream: stream)
            #expect(result.totals.sent == messages && result.totals.delivered == messages, "\(stream): \(result.totals)")
            #expect((result.protocolEvents?[counter: "sioUnauditedEvents"] ?? -1) == unaudited, "\(stream)")
        }
        if let lists, lists["events"] == ["tick"], lists["namespaces"] == ["/"] {
            let result = try Self.audit(lists, stream: "1.s")
            #expect(result.streams.map(\.stream) == ["tick"] && result.totals.ok == 4, "\(result.streams.map(\.stream))")
        }
    }

    @Test("the name is read between its quotes, escapes as written; no name, no event")
    func names() {
        let cases: [(String, String?)] = [
            (#"["tick",1]"#, "tick"), (#" [ "a\"b" ]"#, #"a\"b"#), (#"[1,"x"]"#, nil), (#"{"x":1}"#, nil), (#"["open"#, nil),
        ]
        for (event, expected) in cases {
            let bytes = Array(event.utf8)
            let range = bytes.withUnsafeBufferPointer { JSONArrayIndexer.name(ofEvent: $0) }
            #expect(range.map { String(decoding: bytes[$0], as: UTF8.self) } == expected, "\(event)")
        }
    }
}
