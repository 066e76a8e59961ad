import ChaosCore
import Testing

@testable import ChaosAudit

/// `protocol.fanout` over NDJSON lines: each member's messages name their sender and seq; what the server writes to a
/// member is that member's own copy of each sender's stream. Without a handshake, a connection's receiver is the
/// sender its first own message names; a copy written to it before that is counted as unattributed.
@Suite("Fan-out audit")
struct FanoutAuditTests {
    static let spec: ProtocolSpec = {
        var spec = ProtocolSpec(stream: "from")
        spec.seq = "n"
        spec.fanout = ProtocolSpec.Fanout(sender: "from", seq: "n")
        return spec
    }()

    static func line(_ from: String, _ n: Int) -> [UInt8] { Array(#"{"from":"\#(from)","n":\#(n)}"#.utf8) + [10] }

    static func relay(_ s: inout TrafficScript, _ id: ConnectionID, _ bytes: [UInt8], _ direction: Direction) {
        s.sendBytes(id, direction, bytes)
        s.deliverBytes(id, direction, bytes)
    }

    @Test("a member's copy of each sender's stream is its own: owed from its first message on; a copy before it is unattributed")
    func membersCopies() throws {
        var s = TrafficScript()
        s.open(1)  // alice
        s.open(2)  // bob
        Self.relay(&s, 1, Self.line("alice", 1), .upstream)
        Self.relay(&s, 2, Self.line("alice", 1), .downstream)  // bob has not said who he is yet
        Self.relay(&s, 2, Self.line("bob", 1), .upstream)
        Self.relay(&s, 1, Self.line("bob", 1), .downstream)
        for n in 2...4 { Self.relay(&s, 1, Self.line("alice", n), .upstream) }
        for n in 2...3 { Self.relay(&s, 2, Self.line("alice", n), .downstream) }  // 4 never reaches bob
        s.close(1)
        s.close(2)
        let engine = try AuditEngine(spec: Self.spec)
        engine.ingest(s.events)
        let result = engine.finish()
        func copy(_ stream: String, _ receiver: String?, _ direction: Direction = .downstream) -> DeliveryCounts? {
            result.streams.first { $0.stream == stream && $0.receiver == receiver && $0.direction == direction }?.counts
        }
        #expect(copy("alice", nil, .upstream)?.ok == 4 && copy("bob", nil, .upstream)?.ok == 1)
        let bob = try #require(
            copy("alice", "bob"),
            "\(result.streams.map { "\($0.stream) \($0.direction) \($0.receiver ?? "-") ok \($0.counts.ok)" }) \(result.messages)"
        )
        #expect(bob.ok == 2 && bob.lost == 1, "owed alice's 2-4 (1 was hers before bob joined): \(bob)")
        #expect(copy("bob", "alice")?.ok == 1 && copy("bob", "alice")?.lost == 0)
        #expect(result.streams.count == 4, "no copy of a member's own stream: \(result.streams.map { "\($0.stream) \($0.receiver ?? "-")" })")
        #expect(result.messages.unattributed == 1)
        #expect(result.anomalies.contains { $0.kind == .lost && $0.receiver == "bob" && $0.fromSeq == 4 })
    }
}
