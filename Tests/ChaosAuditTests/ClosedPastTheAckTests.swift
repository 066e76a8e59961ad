import ChaosCore
import Testing

@testable import ChaosAudit

/// A consumer that closed a connection whose TCP had taken seqs past its last ack there, and then named a lower resume
/// point on a newer connection, never had those seqs (``StreamLedger/resumePointNamed(_:on:others:)``).
@Suite("What a consumer's closed connection took past its last ack, against its next resume point")
struct ClosedPastTheAckTests {
    /// s79q2 (the naive WebSocket client's phone's day, kernel dead path): the server's idle timeout closed its
    /// connection with a FIN as the partition's held seqs 482-585 reached it; its TCP acknowledged them with the FIN,
    /// its application never read them, and its first ack on the next connection said 481. The naive client went on
    /// from 594: the audit counted 104 seqs ok that the server's log never had.
    static func closedPastItsAck(resent: [Int]) -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.relay(1, [3, 4])  // taken by the consumer's TCP, never read
        s.add(1, .closed(.server, .fin))  // the consumer's idle timeout
        s.add(1, .closed(.client, .fin))
        s.at(1)
        s.open(2)
        s.consumerAcks(2, upTo: 2)  // its resume point
        s.relay(2, resent + [5, 6])
        s.consumerAcks(2, upTo: 6)
        s.close(2)
        return s
    }

    @Test("a consumer that closed its connection and resumed below what its TCP took there never had those seqs")
    func closedThenResumedBelow() throws {
        let totals = try TrafficScript.auditWithAcks(Self.closedPastItsAck(resent: [])).totals
        #expect(totals.ok == 4 && totals.lost == 2 && totals.unconfirmed == 0, "\(totals)")
    }

    @Test("their resend on the newer connection delivers them: nothing lost")
    func closedThenResumedBelowAndResent() throws {
        let totals = try TrafficScript.auditWithAcks(Self.closedPastItsAck(resent: [3, 4])).totals
        #expect(totals.ok == 6 && totals.lost == 0 && totals.unconfirmed == 0, "\(totals)")
    }

    @Test("a connection still open when the consumer names its resume point elsewhere is not judged by it")
    func openConnectionIsNotJudged() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.relay(1, [3, 4])
        s.at(1)
        s.open(2)
        s.consumerAcks(2, upTo: 2)  // named while the first connection is open: it may still hand 3-4 over
        s.relay(2, [5, 6])
        s.consumerAcks(2, upTo: 6)
        s.close(1)
        s.close(2)
        let totals = try TrafficScript.auditWithAcks(s).totals
        #expect(totals.lost == 0 && totals.ok + totals.unconfirmed == 6, "\(totals)")
    }
}
