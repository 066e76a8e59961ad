import ChaosAudit
import ChaosCore
import ChaosProtocols
import Testing

/// `framing: datagram`: a UDP flow's events as the proxy records them (each read and write one datagram, each write
/// acknowledged at once): every datagram is one message, with no delimiter of its own.
@Suite("Datagram audit")
struct DatagramAuditTests {
    static func datagram(_ seq: Int, stream: String = "s") -> [UInt8] { Array("{\"stream\":\"\(stream)\",\"seq\":\(seq)}".utf8) }

    @Test("each datagram is a message; dropped ones are lost, late ones reordered, and nothing joins two datagrams")
    func datagramsAreMessages() throws {
        var s = TrafficScript()
        s.open(1)
        // The client sends 1...10; the path drops 4 and 7 and swaps 8 and 9.
        for seq in 1...10 { s.sendBytes(1, .upstream, Self.datagram(seq)) }
        for seq in [1, 2, 3, 5, 6, 9, 8, 10] { s.deliverBytes(1, .upstream, Self.datagram(seq)) }
        let engine = try AuditEngine(spec: ProtocolSpec(framing: .datagram, seq: "seq", stream: "stream"))
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.totals.sent == 10 && result.totals.ok == 8)
        #expect(result.totals.lost == 2)
        #expect(result.totals.reordered == 1)
        #expect(result.messages.framingErrors == 0 && result.messages.undecodable == 0)
    }

    @Test("an empty datagram is no message; one larger than max_message is counted as oversized, not kept")
    func emptyAndOversized() throws {
        var s = TrafficScript()
        s.open(1)
        let big = Array("{\"stream\":\"s\",\"seq\":2,\"pad\":\"\(String(repeating: "x", count: 2_000))\"}".utf8)
        for datagram in [[], Self.datagram(1), big] {
            s.sendBytes(1, .downstream, datagram)
            s.deliverBytes(1, .downstream, datagram)
        }
        var spec = ProtocolSpec(framing: .datagram, seq: "seq", stream: "stream")
        spec.maxMessage = 1_024
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.totals.ok == 1)
        #expect(result.anomalies.contains { $0.kind == .oversized })
    }
}
