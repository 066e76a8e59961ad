import ChaosProtocols
import Testing

@testable import ChaosAudit
@testable import ChaosCore

/// `format: protobuf`: binary WebSocket messages (and length-prefixed frames) read by field-number paths.
@Suite("Protobuf messages in the audit")
struct ProtobufAuditTests {
    typealias W = WebSocketWire

    /// session_id = 1 (string), sequence_id = 2, acked_sequence_id = 3, meta.seq = 4.2 (zigzag is not assumed), kind = 5.
    static func message(_ seq: Int64, kind: String = "MSG", session: String = "s1") -> [UInt8] {
        Wire.string(1, session) + Wire.int(2, seq) + Wire.string(5, kind) + Wire.bytes(4, Wire.int(1, 9))
    }

    static func binary(_ payload: [UInt8], mask: [UInt8]? = nil) -> [UInt8] { W.frame(2, payload, mask: mask) }

    @Test("binary WebSocket messages: seq, stream and ignore read by number path; a skipped seq is lost, a resend redelivered")
    func webSocketBinary() throws {
        let spec = ProtocolSpec(framing: .websocket, format: .protobuf, seq: "2", stream: "1", ack: "3", ignore: ["5": ["HELLO", "ACK"]])
        var s = TrafficScript()
        WebSocketAuditTests.open(&s, 1)
        WebSocketAuditTests.relay(&s, 1, Self.binary(Self.message(0, kind: "HELLO"), mask: W.clientMask), .upstream)
        for seq: Int64 in 1...3 { WebSocketAuditTests.relay(&s, 1, Self.binary(Self.message(seq), mask: W.clientMask), .upstream) }
        for seq: Int64 in [1, 2, 4] { WebSocketAuditTests.relay(&s, 1, Self.binary(Self.message(seq, session: "s2")), .downstream) }
        s.at(1)
        s.close(1, .reset)
        WebSocketAuditTests.open(&s, 2)
        WebSocketAuditTests.relay(&s, 2, Self.binary(Self.message(3), mask: W.clientMask), .upstream)
        WebSocketAuditTests.relay(&s, 2, Self.binary(Self.message(4), mask: W.clientMask), .upstream)
        s.close(2)
        let result = try WebSocketAuditTests.audit(s, spec)
        let up = try #require(WebSocketAuditTests.stream(result, "s1", .upstream))
        #expect(up.ok == 4 && up.redelivered == 1 && up.lost == 0, "\(up)")
        let down = try #require(WebSocketAuditTests.stream(result, "s2", .downstream))
        #expect(down.ok == 3 && down.lost == 1, "\(down)")
        #expect(result.streams.count == 2, "the HELLO is ignored: \(result.streams.map(\.stream))")
    }

    @Test("a binary message that is not protobuf is undecodable, once per connection; the audit goes on")
    func garbage() throws {
        let spec = ProtocolSpec(framing: .websocket, format: .protobuf, seq: "2", stream: "1")
        var s = TrafficScript()
        WebSocketAuditTests.open(&s, 1)
        WebSocketAuditTests.relay(&s, 1, Self.binary([0x0f, 0xff, 0xff]), .downstream)
        WebSocketAuditTests.relay(&s, 1, Self.binary(Self.message(1)), .downstream)
        s.close(1)
        let result = try WebSocketAuditTests.audit(s, spec)
        #expect(WebSocketAuditTests.stream(result, "s1", .downstream)?.ok == 1)
        #expect(result.anomalies.contains { $0.kind == .undecodable })
    }

    @Test("a field name that is not a number path is bad input, in the scenario and in the engine")
    func namesMustBeNumbers() throws {
        #expect(throws: ChaosError.self) { try AuditEngine(spec: ProtocolSpec(framing: .websocket, format: .protobuf, seq: "sequence_id")) }
        func scenario(_ protocolSection: String) throws -> Scenario {
            try Scenario.parse(
                yaml: """
                    name: p
                    duration: 5s
                    proxies: [{name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}]
                    protocol: \(protocolSection)
                    """,
                file: "p.yaml"
            )
        }
        let lines = try #require(throws: ChaosError.self) { try scenario("{framing: lines, format: protobuf, seq: '2'}") }
        #expect(lines.message.contains("binary messages"), "\(lines.message)")
        let named = try #require(throws: ChaosError.self) { try scenario("{framing: websocket, format: protobuf, seq: sequence_id}") }
        #expect(named.message.contains("number path"), "\(named.message)")
        let fine = try scenario("{framing: length-prefixed, format: protobuf, seq: '2', stream: '1', ignore: {'5': [X]}}")
        #expect(fine.protocolSpec?.format == .protobuf)
    }
}
