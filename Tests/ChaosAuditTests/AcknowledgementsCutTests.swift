import ChaosAudit
import ChaosCore
import Testing

/// A QUIC connection that died on its flow's move: the server's ACKs of what the proxy wrote to it before the move
/// went to the old socket, so nothing can prove or disprove those deliveries (`acknowledgementsCut`). They are
/// unconfirmed, unless a later delivery or the consumer's own ack settles them; what was written after the move and
/// never acknowledged is lost, as before.
@Suite("Written before a move, acknowledgements cut: unconfirmed, not lost")
struct AcknowledgementsCutTests {
    /// On connection 1, the client's seqs 1-3 written to the server, 1 acknowledged; the acknowledgements of 2 and 3
    /// cut; seq 4 written after the move (never acknowledged: a server that does not migrate drops it); then the
    /// connection ends. `cut` false: the connection ends with no word of the cut (the rule before it).
    private func diedOnTheMove(cut: Bool = true) -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2, 3], .upstream)
        s.write(1, [1, 2, 3], .upstream)
        s.at(0.1)
        s.acknowledge(1, .upstream, upTo: Int64(TrafficScript.message(1).count))
        s.at(0.2)
        s.send(1, [4], .upstream)
        s.write(1, [4], .upstream)
        s.at(2)
        if cut { s.add(1, .path(.acknowledgementsCut(.server, upTo: Int64(TrafficScript.messages([1, 2, 3]).count)))) }
        s.close(1)
        return s
    }

    /// The audit of `s` by the default protocol (newline JSON, no acks).
    static func audit(_ s: TrafficScript) throws -> AuditResult {
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        return engine.finish()
    }

    @Test("never settled: seqs 2 and 3 unconfirmed, seq 4 (written after the move) lost")
    func unsettled() throws {
        let totals = try Self.audit(diedOnTheMove()).totals
        #expect(totals.ok == 1 && totals.unconfirmed == 2 && totals.lost == 1, "\(totals)")
    }

    @Test("the client resends from seq 3 on its next connection: 2 stays unconfirmed, 3 and 4 delivered once")
    func resentSettles() throws {
        var s = diedOnTheMove()
        s.at(3)
        s.open(2)
        s.relay(2, [3, 4, 5], .upstream)
        let totals = try Self.audit(s).totals
        #expect(totals.ok == 4 && totals.unconfirmed == 1 && totals.lost == 0, "\(totals)")
        #expect(totals.redelivered == 0 && totals.duplicated == 0, "\(totals)")
    }

    @Test("without the cut (the old rule), the same connection counts 2 and 3 lost: the cut is what tells them apart")
    func withoutTheCut() throws {
        let totals = try Self.audit(diedOnTheMove(cut: false)).totals
        #expect(totals.ok == 1 && totals.unconfirmed == 0 && totals.lost == 3, "\(totals)")
    }
}
