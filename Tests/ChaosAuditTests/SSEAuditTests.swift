import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The audit over SSE traffic events: a stream named by the request that opened it outlives its connection, a
/// reconnect's `Last-Event-ID` is a resume, a stale resume is redelivered and a skipped event lost, and an event
/// is delivered once the line end of its blank line is acknowledged.
@Suite("SSE audit")
struct SSEAuditTests {
    static let spec = ProtocolSpec(framing: .sse, stream: "query:s")

    static func event(_ seq: Int) -> [UInt8] { Array("id: \(seq)\nevent: tick\ndata: {\"seq\":\(seq)}\n\n".utf8) }

    /// Opens connection `id`: the client's GET (resuming from `lastEventID`), then the event-stream response head.
    static func open(_ s: inout TrafficScript, _ id: ConnectionID, lastEventID: Int? = nil, retry: Bool = false) {
        s.open(id)
        let request = SSEDecoderTests.request("/events?s=feed", headers: lastEventID.map { ["Last-Event-ID: \($0)"] } ?? [])
        let head = SSEDecoderTests.response() + (retry ? Array("retry: 500\n\n".utf8) : [])
        relay(&s, id, request, .upstream)
        relay(&s, id, head, .downstream)
    }

    static func relay(_ s: inout TrafficScript, _ id: ConnectionID, _ bytes: [UInt8], _ direction: Direction) {
        s.sendBytes(id, direction, bytes)
        s.deliverBytes(id, direction, bytes)
    }

    static func audit(_ s: TrafficScript, _ spec: ProtocolSpec = spec) throws -> AuditResult {
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        return engine.finish()
    }

    static func feed(_ result: AuditResult) -> DeliveryCounts? {
        result.streams.first { $0.stream == "feed" && $0.direction == .downstream }?.counts
    }

    @Test("a client resuming from a stale Last-Event-ID gets events it already had: redelivered; a resume is counted")
    func staleResume() throws {
        var s = TrafficScript()
        Self.open(&s, 1, retry: true)
        for seq in 1...3 { Self.relay(&s, 1, Self.event(seq), .downstream) }
        s.at(1)
        s.close(1, .reset)
        Self.open(&s, 2, lastEventID: 1)
        for seq in 2...4 { Self.relay(&s, 2, Self.event(seq), .downstream) }
        s.close(2)
        let result = try Self.audit(s)
        let feed = try #require(Self.feed(result))
        #expect(feed.ok == 4 && feed.redelivered == 2 && feed.lost == 0)
        let events = try #require(result.protocolEvents)
        #expect(events[counter: "sseStreams"] == 2 && events[counter: "sseResumes"] == 1 && events[counter: "sseRetries"] == 1)
    }

    @Test("format: text reads the seq from the event's id line: the stale resume is redelivered the same way")
    func seqFromEventID() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        for seq in 1...3 { Self.relay(&s, 1, Array("id: \(seq)\ndata: tick\n\n".utf8), .downstream) }
        s.close(1, .reset)
        Self.open(&s, 2, lastEventID: 2)
        for seq in 3...4 { Self.relay(&s, 2, Array("id:\(seq)\ndata: tick\n\n".utf8), .downstream) }
        s.close(2)
        let spec = ProtocolSpec(framing: .sse, format: .text, seq: "seq", stream: "query:s", regex: "(?m)^id: ?(?<seq>[0-9]+)")
        let feed = try #require(Self.feed(try Self.audit(s, spec)))
        #expect(feed.ok == 4 && feed.redelivered == 1 && feed.lost == 0)
    }

    @Test(
        "seq: id is the event's own id field (format json), data.KEY a key of its data, a bare key still one of the data's",
        arguments: [("id", "data.kind"), ("data.n", "data.kind"), ("n", "kind")]
    )
    func eventFields(seq: String, type: String) throws {
        var s = TrafficScript()
        Self.open(&s, 1, retry: true)
        // The data's n is the id; a hello event (no id, kind HELLO) is ignored by its data's kind.
        Self.relay(&s, 1, Array("event: hello\ndata: {\"kind\":\"HELLO\"}\n\n".utf8), .downstream)
        for seq in 1...3 { Self.relay(&s, 1, Array("id: \(seq)\nevent: tick\ndata: {\"kind\":\"T\",\"n\":\(seq)}\n\n".utf8), .downstream) }
        s.close(1, .reset)
        Self.open(&s, 2, lastEventID: 1)
        for seq in 2...4 { Self.relay(&s, 2, Array("id: \(seq)\ndata: {\"kind\":\"T\",\"n\":\(seq)}\n\n".utf8), .downstream) }
        s.close(2)
        let spec = ProtocolSpec(framing: .sse, seq: seq, stream: "query:s", type: type, ignore: [type: ["HELLO"]])
        let result = try Self.audit(s, spec)
        let feed = try #require(Self.feed(result))
        #expect(feed.ok == 4 && feed.redelivered == 2 && feed.lost == 0, "\(feed)")
        #expect(result.messages.ignored >= 2 && result.messages.unsequenced == 0, "\(result.messages)")
        #expect(SSEProtocol.namesEventFields(spec) == (seq != "n"))
    }

    @Test("an event envelope quotes an id that is not a number and data that is not JSON; the id is the event's own")
    func envelopeShape() throws {
        var parser = SSEEventParser(cap: 1024, envelope: true)
        var events: [String] = []
        let input = Array("id: a\"b\nevent: x\ndata: plain \"text\"\ndata: two\n\ndata: [1]\n\nid: 12\ndata: {\"n\":1}\n\n".utf8)
        input.withUnsafeBufferPointer { buffer in
            parser.feed(buffer, 0..<buffer.count) { output in
                if case .event(let body, _) = output { events.append(String(decoding: body, as: UTF8.self)) }
            }
        }
        #expect(
            events == [
                #"{"id":"a\"b","event":"x","data":"plain \"text\"\ntwo"}"#, #"{"event":"message","data":[1]}"#,
                #"{"id":12,"event":"message","data":{"n":1}}"#,
            ]
        )
    }

    @Test("a server that skips an event on resume: the skipped event is lost")
    func skippedOnResume() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        for seq in 1...3 { Self.relay(&s, 1, Self.event(seq), .downstream) }
        s.close(1, .reset)
        Self.open(&s, 2, lastEventID: 3)
        for seq in [5, 6] { Self.relay(&s, 2, Self.event(seq), .downstream) }
        s.close(2)
        let feed = try #require(Self.feed(try Self.audit(s)))
        #expect(feed.ok == 5 && feed.lost == 1 && feed.redelivered == 0)
    }

    @Test("an event is delivered only once its blank line's line end is acknowledged", arguments: [false, true])
    func deliveryWaitsForBlankLine(lastByteAcknowledged: Bool) throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        let written = SSEDecoderTests.response().count
        let bytes = Self.event(1)
        s.sendBytes(1, .downstream, bytes)
        s.writeBytes(1, .downstream, bytes)
        s.acknowledge(1, .downstream, upTo: Int64(written + bytes.count - (lastByteAcknowledged ? 0 : 1)))
        s.close(1, .reset)
        let feed = try #require(Self.feed(try Self.audit(s)))
        #expect(feed.delivered == (lastByteAcknowledged ? 1 : 0))
    }

    @Test("a scenario reads framing: sse with a query: stream key; query: on lines is still refused")
    func scenario() throws {
        try Self.spec.checkInvariants { ChaosError.badInput($0) }
        #expect(try ProtocolRegistry.plugin(reading: .sse).name == "sse")
        let refused = try #require(throws: ChaosError.self) {
            try ProtocolSpec(framing: .lines, stream: "query:s").checkInvariants { ChaosError.badInput($0) }
        }
        #expect(
            refused.message.contains(
                "query:NAME names a query parameter of the request that opened the stream; it needs framing websocket, sse, socketio, http3 or auto"
            )
        )
    }
}
