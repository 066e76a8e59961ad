import ChaosAudit
import ChaosCore
import ChaosProtocols
import Testing

@Suite("Framing and extraction")
struct FramingTests {
    static func prefixed(_ body: [UInt8], width: Int, offset: Int) -> [UInt8] {
        let length = body.count - offset
        return (0..<width).reversed().map { UInt8(truncatingIfNeeded: length >> ($0 * 8)) } + body
    }

    @Test("length-prefixed frames of 1, 2 and 4 bytes, with an offset, split anywhere", arguments: [(1, 0), (2, 0), (4, 0), (4, -4), (2, 2)])
    func lengthPrefixed(width: Int, offset: Int) throws {
        // The prefix holds length - offset: with offset -width it counts itself.
        var bytes: [UInt8] = []
        for seq in 1...30 { bytes += Self.prefixed(Array("{\"seq\":\(seq),\"stream\":\"s\"}".utf8), width: width, offset: offset) }
        var s = TrafficScript()
        s.open(1)
        for start in stride(from: 0, to: bytes.count, by: 5) { s.sendBytes(1, .upstream, Array(bytes[start..<min(bytes.count, start + 5)])) }
        s.deliverBytes(1, .upstream, bytes)
        let engine = try AuditEngine(spec: ProtocolSpec(framing: .lengthPrefixed(bytes: width, offset: offset)))
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.totals.ok == 30 && result.totals.sent == 30 && result.totals.lost == 0)
        #expect(result.messages.framingErrors == 0 && result.messages.undecodable == 0)
    }

    @Test("a stream that is not the declared framing is reported once per connection and does not flood")
    func wrongFraming() throws {
        var s = TrafficScript()
        s.open(1)
        // NDJSON read as 2-byte length-prefixed: '{"' is a length of 31522, then garbage.
        for _ in 0..<100 { s.deliver(1, Array(1...50)) }
        s.open(2)
        s.deliver(2, [1])
        let engine = try AuditEngine(spec: ProtocolSpec(framing: .lengthPrefixed(bytes: 2, offset: 0)))
        engine.ingest(s.events)
        let result = engine.finish()
        let framing = result.anomalies.filter { $0.kind == .framing || $0.kind == .undecodable }
        #expect(framing.count <= 2)
        #expect(framing.allSatisfy { $0.connection == 1 || $0.connection == 2 })
        #expect(result.anomalies.count < 10)
    }

    @Test("garbage lines are undecodable, reported once per connection, counted every time")
    func undecodable() throws {
        var s = TrafficScript()
        s.open(1)
        s.deliverBytes(1, .downstream, Array("hello\nnot json\n{\"seq\":\"x\"}\n".utf8))
        s.relay(1, [1])
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.messages.undecodable == 3)
        #expect(result.anomalies.filter { $0.kind == .undecodable }.count == 1)
        #expect(result.totals.ok == 1)
    }

    @Test("JSON pointers, nested objects, escapes and key order are handled by the scanner")
    func pointers() throws {
        let line = #"{"payload":{"seq":999,"text":"a \"quoted\" } brace"},"list":[1,{"seq":5}],"meta":{"x":[],"seq":7,"stream":"s\u00e9"}}"#
        var s = TrafficScript()
        s.open(1)
        s.sendBytes(1, .downstream, Array((line + "\n").utf8))
        s.deliverBytes(1, .downstream, Array((line + "\n").utf8))
        let engine = try AuditEngine(spec: ProtocolSpec(seq: "/meta/seq", stream: "/meta/stream"), seqStart: 7)
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.streams.map(\.stream) == ["sé"])
        #expect(result.streams.first?.highestSeq == 7 && result.totals.ok == 1)
    }

    @Test("per-direction overrides on lines: each direction reads its own seq field and ignores its own types")
    func directionOverrides() throws {
        var s = TrafficScript()
        s.open(1)
        let up = #"{"op":"req","stream":"a","id":1}"# + "\n" + #"{"op":"hb","stream":"a","id":9}"# + "\n"
        let down = #"{"type":"MSG","stream":"a","n":1}"# + "\n" + #"{"type":"MSG","stream":"a","n":2}"# + "\n"
        s.sendBytes(1, .upstream, Array(up.utf8))
        s.deliverBytes(1, .upstream, Array(up.utf8))
        s.sendBytes(1, .downstream, Array(down.utf8))
        s.deliverBytes(1, .downstream, Array(down.utf8))
        let spec = ProtocolSpec(upstream: .init(seq: "id", type: "op", ignore: ["type": ["hb"]]), downstream: .init(seq: "n"))
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.streams.map { "\($0.stream)/\($0.direction.rawValue)=\($0.counts.ok)" } == ["a/downstream=2", "a/upstream=1"])
        #expect(result.messages.ignored == 2, "hb once as read, once as delivered")
    }

    @Test("format text reads seq and stream from named regex groups")
    func textFormat() throws {
        var s = TrafficScript()
        s.open(1)
        let lines = (1...5).filter { $0 != 3 }.map { "MSG stream=a seq=\($0) hello\n" }.joined()
        s.sendBytes(1, .downstream, Array(lines.utf8))
        s.deliverBytes(1, .downstream, Array(lines.utf8))
        let spec = ProtocolSpec(format: .text, seq: "seq", stream: "stream", regex: #"stream=(?<stream>\w+) seq=(?<seq>\d+)"#)
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.totals.ok == 4 && result.totals.lost == 1 && result.streams.first?.stream == "a")
    }

    @Test("a descriptor set that cannot be read and a bad regex are bad input")
    func badSpecs() {
        #expect(throws: ChaosError.self) {
            try AuditEngine(spec: ProtocolSpec(framing: .grpc, format: .protobuf, seq: "sequence_id", descriptors: "/nonexistent.protoset"))
        }
        #expect(throws: ChaosError.self) { try AuditEngine(spec: ProtocolSpec(format: .text, regex: "(")) }
        #expect(throws: ChaosError.self) { try AuditEngine(spec: ProtocolSpec(format: .text, regex: "(?<other>x)")) }
    }

    @Test("the range set merges, splits and counts holes")
    func rangeSet() {
        var set = SeqRangeSet()
        for value in [1, 2, 3, 7, 5, 4, 10] as [Int64] { set.insert(value) }
        #expect(set.intervals.count == 3 && set.count == 7)
        #expect(set.holes(from: 1, through: 10).map { [$0.lower, $0.upper] } == [[6, 6], [8, 9]])
        #expect(set.remove(4) && set.intervals.count == 4)
        set.insert(1, through: 20)
        #expect(set.intervals.count == 1 && set.count == 20 && set.count(above: 15) == 5)
        // A range removed from inside one interval splits it; across several, it trims the ends and drops the middle.
        set.remove(from: 5, through: 8)
        #expect(set.intervals.map { [$0.lower, $0.upper] } == [[1, 4], [9, 20]] && set.count == 16)
        set.insert(30, through: 40)
        set.remove(from: 3, through: 32)
        #expect(set.intervals.map { [$0.lower, $0.upper] } == [[1, 2], [33, 40]] && set.count == 10)
        set.remove(from: 41, through: 50)
        set.remove(from: 9, through: 8)
        #expect(set.count == 10)
        set.remove(from: 0, through: 100)
        #expect(set.isEmpty && set.count == 0)
    }
}
