import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The audit over WebSocket traffic events: streams named by the upgrade request, per-direction fields,
/// delivery at the end of a message's last frame, cuts, close codes and bytes that do not parse.
@Suite("WebSocket audit")
struct WebSocketAuditTests {
    typealias W = WebSocketWire

    static func spec(stream: String = "header:x-stream", downstream: ProtocolSpec.DirectionOverride? = nil) -> ProtocolSpec {
        ProtocolSpec(framing: .websocket, stream: stream, ack: "ack", ignore: ["type": ["PING", "PONG"]], downstream: downstream)
    }

    static func message(_ seq: Int, field: String = "seq") -> String { "{\"type\":\"MSG\",\"\(field)\":\(seq)}" }

    /// Opens connection `id` with the upgrade handshake relayed both ways (header X-Stream: `stream`).
    static func open(_ s: inout TrafficScript, _ id: ConnectionID, stream: String = "c1", extensions: String? = nil) {
        s.open(id)
        let request = W.request(headers: ["X-Stream: \(stream)"])
        let response = W.response(extensions: extensions)
        s.sendBytes(id, .upstream, request)
        s.deliverBytes(id, .upstream, request)
        s.sendBytes(id, .downstream, response)
        s.deliverBytes(id, .downstream, response)
    }

    static func relay(_ s: inout TrafficScript, _ id: ConnectionID, _ bytes: [UInt8], _ direction: Direction) {
        s.sendBytes(id, direction, bytes)
        s.deliverBytes(id, direction, bytes)
    }

    static func audit(_ s: TrafficScript, _ spec: ProtocolSpec = spec()) throws -> AuditResult {
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        return engine.finish()
    }

    static func stream(_ result: AuditResult, _ name: String, _ direction: Direction) -> DeliveryCounts? {
        result.streams.first { $0.stream == name && $0.direction == direction }?.counts
    }

    @Test("a stream named by an upgrade header outlives its connection: a resume is redelivered, a skipped seq is lost")
    func headerStream() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        for seq in 1...3 { Self.relay(&s, 1, W.text(Self.message(seq), mask: W.clientMask), .upstream) }
        for seq in 1...3 { Self.relay(&s, 1, W.text(Self.message(seq)), .downstream) }
        s.at(1)
        s.close(1, .reset)
        Self.open(&s, 2)
        for seq in [3, 5] { Self.relay(&s, 2, W.text(Self.message(seq)), .downstream) }
        Self.relay(&s, 2, W.close(1000, "done"), .downstream)
        s.close(2)
        let result = try Self.audit(s)
        let down = try #require(Self.stream(result, "c1", .downstream))
        #expect(down.ok == 4 && down.lost == 1 && down.redelivered == 1)
        #expect(Self.stream(result, "c1", .upstream)?.ok == 3)
        #expect(result.protocolEvents?.upgrades == 2)
        #expect(result.protocolEvents?[family: "closeCodes"] == ["1006": 1, "1000": 1])
        #expect(result.protocolEvents?.abnormalClosures == 1)
    }

    @Test(
        "a consumer that sent its close frame reads nothing more: what its TCP takes after is not delivered, and the resend on its next connection is delivered once"
    )
    func consumerClosing() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        for seq in 1...2 { Self.relay(&s, 1, W.text(Self.message(seq)), .downstream) }
        // The client gives up on the connection (its keepalive timed out) and says so; then the server's seq 3
        // reaches it, and its TCP acknowledges what its application never reads.
        Self.relay(&s, 1, W.close(1011, "keepalive ping timeout", mask: W.clientMask), .upstream)
        Self.relay(&s, 1, W.text(Self.message(3)), .downstream)
        s.close(1, .reset)
        Self.open(&s, 2)
        for seq in 3...4 { Self.relay(&s, 2, W.text(Self.message(seq)), .downstream) }
        s.close(2)
        let down = try #require(Self.stream(try Self.audit(s), "c1", .downstream))
        #expect(down.ok == 4 && down.redelivered == 0 && down.lost == 0, "\(down)")
    }

    @Test("a consumer's close frame: what its TCP took after it and never got again is lost, unless its own ack vouches for it")
    func consumerClosingThenAck() throws {
        for vouched in [false, true] {
            var s = TrafficScript()
            Self.open(&s, 1)
            Self.relay(&s, 1, W.text(Self.message(1)), .downstream)
            Self.relay(&s, 1, W.close(1000, "bye", mask: W.clientMask), .upstream)
            Self.relay(&s, 1, W.text(Self.message(2)), .downstream)
            s.close(1)
            Self.open(&s, 2)
            // The client's resume ack names what it read: 2 when it read seq 2 after its close after all.
            Self.relay(&s, 2, W.text("{\"type\":\"ACK\",\"ack\":\(vouched ? 2 : 1)}", mask: W.clientMask), .upstream)
            s.close(2)
            let down = try #require(Self.stream(try Self.audit(s), "c1", .downstream))
            #expect(down.ok == (vouched ? 2 : 1) && down.lost == (vouched ? 0 : 1), "vouched \(vouched): \(down)")
        }
    }

    @Test("a query parameter names the stream, and each direction reads its own fields")
    func queryStreamAndOverrides() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        Self.relay(&s, 1, W.text(Self.message(1), mask: W.clientMask), .upstream)
        Self.relay(&s, 1, W.text(Self.message(1, field: "n") + " ") + W.text(Self.message(2, field: "n")), .downstream)
        s.close(1)
        let result = try Self.audit(s, Self.spec(stream: "query:session", downstream: .init(seq: "n")))
        #expect(Self.stream(result, "s9", .downstream)?.ok == 2)
        #expect(Self.stream(result, "s9", .upstream)?.ok == 1)
    }

    @Test("a message is delivered once the consumer's TCP acknowledged the end of its last frame, not before")
    func deliveredAtLastFrame() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        let first = W.frame(1, Array("{\"seq\":".utf8), fin: false)
        let last = W.frame(0, Array("1}".utf8))
        s.sendBytes(1, .downstream, first + last)
        s.writeBytes(1, .downstream, first + last)
        s.acknowledge(1, .downstream, upTo: Int64(W.response().count + first.count + last.count - 1))
        s.at(1)
        s.close(1, .reset)
        let result = try Self.audit(s, Self.spec(stream: "stream"))
        #expect(result.totals.delivered == 0 && result.totals.lost == 1)
    }

    @Test("a frame cut mid-payload by a reset is truncated and its seq lost; the audit goes on")
    func cutByReset() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        Self.relay(&s, 1, W.text(Self.message(1)), .downstream)
        let second = W.text(Self.message(2))
        s.sendBytes(1, .downstream, second)
        s.deliverBytes(1, .downstream, Array(second.prefix(9)))
        s.at(1)
        s.close(1, .reset)
        let result = try Self.audit(s)
        let down = try #require(Self.stream(result, "c1", .downstream))
        #expect(down.ok == 1 && down.lost == 1 && down.truncated == 1)
    }

    @Test("garbage after the handshake is a protocol anomaly with its offset; other connections are still audited")
    func garbage() throws {
        var s = TrafficScript()
        Self.open(&s, 1)
        Self.relay(&s, 1, W.text(Self.message(1)), .downstream)
        Self.relay(&s, 1, Array("HTTP/1.1 200 OK\r\n\r\nnot frames".utf8), .downstream)
        Self.open(&s, 2, stream: "c2")
        Self.relay(&s, 2, W.text(Self.message(1)) + W.text(Self.message(2)), .downstream)
        s.close(1)
        s.close(2)
        let result = try Self.audit(s)
        #expect(result.anomalyCounts["protocol"] == 1)
        let anomaly = try #require(result.anomalies.first { $0.kind == .protocolError })
        let offset = W.response().count + W.text(Self.message(1)).count + 2
        #expect(anomaly.detail?.contains("at byte \(offset)") == true, "\(anomaly.detail ?? "")")
        #expect(Self.stream(result, "c2", .downstream)?.ok == 2)
        #expect(Self.stream(result, "c1", .downstream)?.ok == 1)
        #expect(result.protocolEvents?.protocolErrors == 1)
    }

    @Test("deflated messages both ways are audited like plain ones")
    func deflated() throws {
        var s = TrafficScript()
        Self.open(&s, 1, extensions: "permessage-deflate; client_no_context_takeover")
        let up = Deflater(takeover: false)
        let down = Deflater(takeover: true)
        for seq in 1...5 {
            Self.relay(&s, 1, W.frame(1, up.compress(Array(Self.message(seq).utf8)), rsv1: true, mask: W.clientMask), .upstream)
            Self.relay(&s, 1, W.frame(1, down.compress(Array(Self.message(seq).utf8)), rsv1: true), .downstream)
        }
        s.close(1)
        let result = try Self.audit(s)
        #expect(result.totals.ok == 10 && result.totals.lost == 0)
    }
}
