import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// A Socket.IO client's resume point (its CONNECT auth's `offset`, the last seq its application had) judged against
/// what earlier connections really delivered: a server that resumes past it skips what the client's TCP took but its
/// application never had (lost, where the TCP view alone says ok), a resend from it is a redelivery of what was
/// delivered (a stale resume point), and an honest resume point loses nothing.
@Suite("Socket.IO resume points: judged against what was delivered")
struct SocketIOResumeTests {
    typealias W = WebSocketWire
    static let spec = ProtocolSpec(framing: .socketio, seq: "1.seq", stream: "auth:stream")

    /// A WebSocket-only connection `id` of stream c1: the client's CONNECT resuming after `offset`, then the server's
    /// ticks `seqs`, each written whole and acknowledged by the client's TCP; then both legs close.
    static func connection(_ s: inout TrafficScript, _ id: ConnectionID, offset: Int, seqs: ClosedRange<Int>) {
        s.open(id)
        let up =
            W.request(target: "/socket.io/?EIO=4&transport=websocket", headers: [])
            + W.text(#"40{"stream":"c1","offset":\#(offset)}"#, mask: W.clientMask)
        s.sendBytes(id, .upstream, up)
        s.deliverBytes(id, .upstream, up)
        var down =
            W.response() + W.text(#"0{"sid":"s\#(id)","upgrades":[],"pingInterval":25000,"pingTimeout":20000}"#) + W.text(#"40{"sid":"x\#(id)"}"#)
        for seq in seqs { down += W.text(#"42["tick",{"seq":\#(seq)}]"#) }
        s.sendBytes(id, .downstream, down)
        s.deliverBytes(id, .downstream, down)
        s.close(id)
    }

    /// The downstream stream c1 after a first connection delivered 1...5 and a second resumed after `offset` with `seqs`.
    static func resumed(offset: Int, seqs: ClosedRange<Int>) throws -> DeliveryCounts {
        var s = TrafficScript()
        connection(&s, 1, offset: 0, seqs: 1...5)
        s.at(1)
        connection(&s, 2, offset: offset, seqs: seqs)
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        let result = engine.finish()
        return try #require(result.streams.first { $0.stream == "c1" && $0.direction == .downstream }?.counts)
    }

    @Test(
        "what a resume point says, judged: a skip past it is lost, a resend from below what was delivered is redelivered, an honest one loses nothing",
        arguments: [
            // The client's application had 1...3 (its TCP took 4 and 5 unread); the server resumes at 6: 4 and 5 lost.
            (3, 6...8, (ok: 6, lost: 2, redelivered: 0)),
            // The same, and the server resends from 4: nothing lost; what was delivered comes again.
            (3, 4...8, (ok: 8, lost: 0, redelivered: 2)),
            // The client had all five and says so: the server resumes at 6.
            (5, 6...8, (ok: 8, lost: 0, redelivered: 0)),
        ]
    )
    func judged(offset: Int, seqs: ClosedRange<Int>, expected: (ok: Int64, lost: Int64, redelivered: Int64)) throws {
        let counts = try Self.resumed(offset: offset, seqs: seqs)
        #expect(
            (counts.ok, counts.lost, counts.redelivered) == expected,
            "offset \(offset), then \(seqs): \(counts)"
        )
    }

    @Test("a skip the resume point shows is a lost anomaly naming the seqs the client never had")
    func lostRange() throws {
        var s = TrafficScript()
        Self.connection(&s, 1, offset: 0, seqs: 1...5)
        s.at(1)
        Self.connection(&s, 2, offset: 3, seqs: 6...8)
        let engine = try AuditEngine(spec: Self.spec)
        engine.ingest(s.events)
        let lost = engine.finish().anomalies.filter { $0.kind == .lost }
        #expect(lost.map { [$0.fromSeq, $0.toSeq] } == [[4, 5]], "\(lost)")
    }
}
