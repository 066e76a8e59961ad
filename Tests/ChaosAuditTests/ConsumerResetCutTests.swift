import ChaosAudit
import ChaosCore
import Testing

/// A consumer that reset its connection itself, with no FIN first (its socket closed with later bytes unread): what
/// went out to it past its last acknowledgement its kernel took ahead of its RST, and its application may have read
/// (its ACK was waiting, up to 40 ms, for a reply to ride on). The relay says so (`acknowledgementsCut`, up to what its
/// TCP had sent); those seqs are unconfirmed, not lost, unless a later delivery settles them. s56's CI run: a
/// Socket.IO member read seq 41, closed its socket on its ping timeout with 42 unread, and resumed after 41; the
/// audit, which never saw 41 acknowledged, counted it lost (the member's log had it).
@Suite("A consumer's own reset: what went out to it unacknowledged is unconfirmed, not lost")
struct ConsumerResetCutTests {
    /// Connection 1 delivers seqs 1-2 (acknowledged), writes 3-4 (never acknowledged), and the client resets it; the
    /// relay's cut covers what its TCP had sent (`sent`: seqs up to it). Connection 2 resumes after seq `resumeAfter`.
    private func resetByConsumer(sent: Int?, resumeAfter: Int) -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.send(1, [3, 4])
        s.write(1, [3, 4])
        s.at(1)
        if let sent { s.add(1, .path(.acknowledgementsCut(.client, upTo: Int64(TrafficScript.messages(Array(1...sent)).count)))) }
        s.add(1, .closed(.client, .reset))
        s.add(1, .closed(.server, .resetByProxy))
        s.at(2)
        s.open(2)
        s.relay(2, Array((resumeAfter + 1)...6))
        s.close(2)
        return s
    }

    @Test("the consumer resumes after seq 4 (it read 3 and 4): both unconfirmed, nothing lost")
    func readThenReset() throws {
        let totals = try AcknowledgementsCutTests.audit(resetByConsumer(sent: 4, resumeAfter: 4)).totals
        #expect(totals.ok == 4 && totals.unconfirmed == 2 && totals.lost == 0, "\(totals)")
        #expect(totals.duplicated == 0 && totals.redelivered == 0, "\(totals)")
    }

    @Test("the consumer resumes after seq 3: 4 is delivered again, settled; 3 stays unconfirmed")
    func resendSettles() throws {
        let totals = try AcknowledgementsCutTests.audit(resetByConsumer(sent: 4, resumeAfter: 3)).totals
        #expect(totals.ok == 5 && totals.unconfirmed == 1 && totals.lost == 0, "\(totals)")
    }

    @Test("what its TCP had not sent (the cut stops at seq 3) reached no one: seq 4 is lost")
    func unsentIsLost() throws {
        let totals = try AcknowledgementsCutTests.audit(resetByConsumer(sent: 3, resumeAfter: 4)).totals
        #expect(totals.unconfirmed == 1 && totals.lost == 1, "\(totals)")
    }

    @Test("without the cut (a consumer that had sent FIN, whose socket met the bytes closed), 3 and 4 are lost")
    func withoutTheCut() throws {
        let totals = try AcknowledgementsCutTests.audit(resetByConsumer(sent: nil, resumeAfter: 4)).totals
        #expect(totals.unconfirmed == 0 && totals.lost == 2, "\(totals)")
    }
}
