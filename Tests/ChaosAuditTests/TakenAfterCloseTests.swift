import ChaosAudit
import ChaosCore
import Testing

/// Bytes a consumer's TCP took after it had ended its TLS session (close_notify): whether its application read them
/// depends on its TLS stack, so the audit asks the consumer's own acknowledgements, or trusts TCP once the run stops.
@Suite("Taken after the consumer's TLS close")
struct TakenAfterCloseTests {
    /// Seqs 1 and 2 delivered on connection 1, seq 3 written and not yet acknowledged when a fault cut it.
    private func cutWithThreeInFlight() -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.at(0.5)
        s.send(1, [3])
        s.write(1, [3])
        s.at(1)
        s.add(1, .closed(.client, .reset))
        s.add(1, .closed(.server, .cutByFault))
        return s
    }

    /// Seqs 1-3 written on connection 1: seq 1 acknowledged before the consumer's close_notify, 2 and 3 taken after it.
    private func closedWithTwoTakenAfter() -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2, 3])
        s.write(1, [1, 2, 3])
        let one = Int64(TrafficScript.message(1).count)
        let three = Int64(TrafficScript.messages([1, 2, 3]).count)
        s.at(0.5)
        s.acknowledge(1, .downstream, upTo: one)
        s.at(0.6)
        s.add(1, .acknowledgedAfterClose(.client, upTo: three))
        s.at(1)
        s.close(1)
        return s
    }

    /// Seqs 1-3 written on connection 1, seq 1's TCP acknowledgement seen at 0.5 s, the others' not (yet).
    private func threeWrittenOneAcknowledged() -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2, 3])
        s.write(1, [1, 2, 3])
        s.at(0.5)
        s.acknowledge(1, .downstream, upTo: Int64(TrafficScript.message(1).count))
        return s
    }

    @Test("an ack past everything else delivered (the consumer's resume point) vouches for them: lost 0, no resend needed")
    func coveredByTheConsumersAck() throws {
        var s = closedWithTwoTakenAfter()
        s.at(2)
        s.open(2)
        s.consumerAcks(2, upTo: 3)
        s.relay(2, [4, 5])
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 5)
        #expect(result.totals.lost == 0)
    }

    @Test(
        "the consumer's resume ack read only after the producer's resends past it were delivered still vouches: it names a seq nothing delivered"
    )
    func resumeAckReadAfterTheResends() throws {
        // Seen in a fresh-clone run: a wss server ended its session at its idle timeout, its TCP took seqs 2-3 after
        // its close_notify, it resumed the client at ack 3, and the messages carrying that ack reached the client
        // after the client's resends from 4 had reached the server.
        var s = closedWithTwoTakenAfter()
        s.at(2)
        s.open(2)
        s.relay(2, [4, 5])
        s.at(2.1)
        s.consumerAcks(2, upTo: 3)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 5 && result.totals.lost == 0, "\(result.totals)")
    }

    @Test(
        "an ack the consumer wrote naming a message whose TCP acknowledgement the proxy saw only after the consumer's close: that message and those before it delivered, the rest taken after close (s59q2's naive WebSocket run)"
    )
    func namedByAnAckReadBeforeTheClose() throws {
        // A WebSocket client read seq 596, wrote ACK 596 and its answer to the proxy's close frame in one segment; the
        // proxy read them before its poll saw the TCP acknowledgement, and never passed the ACK on.
        var s = threeWrittenOneAcknowledged()
        s.sendBytes(1, .upstream, Array("{\"type\":\"ACK\",\"stream\":\"s\",\"ack\":2}\n".utf8))
        s.at(0.6)
        s.add(1, .acknowledgedAfterClose(.client, upTo: Int64(TrafficScript.messages([1, 2, 3]).count)))
        s.at(1)
        s.close(1)
        s.at(2)
        s.open(2)
        s.relay(2, [4, 5])
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 4 && result.totals.lost == 1, "\(result.totals)")
        #expect(result.anomalies.contains { $0.kind == .lost && $0.fromSeq == 3 && $0.toSeq == 3 }, "seq 3: taken after close, never vouched for")
    }

    @Test(
        "messages still waiting for their TCP acknowledgement on a connection both ends closed: the consumer's resume ack on the next connection, read before the closed one retires, vouches for them; a lower one does not (s60q3's shipped wss scenario)",
        arguments: [false, true]
    )
    func vouchedBeforeTheirConnectionRetires(retiresMidRun: Bool) throws {
        func script(resumeAck: Int) -> TrafficScript {
            var s = threeWrittenOneAcknowledged()
            s.at(1)
            s.close(1)
            // The consumer is back within milliseconds; connection 1 waits for late acknowledgements a while longer.
            s.at(1.05)
            s.open(2)
            s.consumerAcks(2, upTo: resumeAck)
            s.relay(2, [4, 5])
            if retiresMidRun {
                s.at(90)
                s.relay(2, [6])
            }
            return s
        }
        let total = retiresMidRun ? 6 : 5
        let vouched = try TrafficScript.auditWithAcks(script(resumeAck: 3))
        #expect(vouched.totals.ok == total && vouched.totals.lost == 0, "\(vouched.totals)")
        let notVouched = try TrafficScript.auditWithAcks(script(resumeAck: 1))
        #expect(notVouched.totals.ok == total - 2 && notVouched.totals.lost == 2, "\(notVouched.totals)")
    }

    @Test(
        "an ack above everything still waiting on a closed connection names what a later one carried: it does not vouch for them (s80q2's naive gRPC client: 587 waiting where the server's FIN acknowledged only 586, vouched for by an ack of 654 two connections later)"
    )
    func ackAboveTheWaitingRunDoesNotVouch() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.send(1, [3])
        s.write(1, [3])  // never acknowledged by the consumer's TCP
        s.at(0.5)
        s.close(1)
        // The consumer resumes at 2; the naive producer goes on from 4, which a reset cuts past the consumer's ack.
        s.at(1)
        s.open(2)
        s.consumerAcks(2, upTo: 2)
        s.relay(2, [4, 5])
        s.at(1.5)
        s.close(2, .reset)
        // Back again within connection 1's grace, the consumer names 5, which only connection 2 carried.
        s.at(2)
        s.open(3)
        s.consumerAcks(3, upTo: 5)
        s.at(3)
        s.close(3)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.lost == 1 && result.totals.unconfirmed == 0, "\(result.totals)")
        #expect(result.anomalies.contains { $0.kind == .lost && $0.fromSeq == 3 && $0.toSeq == 3 }, "seq 3 never reached the consumer")
    }

    /// Seqs 1-3 delivered on connection 1 and acknowledged; the consumer takes the stream over on connection 2 and says
    /// it holds 3; the proxy then writes 4 and 5 to the old connection, whose TCP takes them (`meanwhile` runs then),
    /// and the consumer ends it.
    private func movedWithTwoOnTheOldConnection(meanwhile: (inout TrafficScript) -> Void = { _ in }) -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2, 3])
        s.consumerAcks(1, upTo: 3)
        s.send(1, [4, 5])
        s.at(1)
        s.open(2)
        s.consumerAcks(2, upTo: 3)
        s.at(1.1)
        s.deliver(1, [4, 5])
        meanwhile(&s)
        s.at(1.4)
        s.add(1, .closed(.client, .fin))
        s.add(1, .closed(.server, .fin))
        return s
    }

    @Test(
        "seqs an old connection delivers after its consumer resumed on a new one below them are unconfirmed once it ends the old one; a resend or an ack naming one settles them (s60bq1's naive gRPC run)",
        arguments: ["nothing", "resend", "named", "namedFirst"]
    )
    func deliveredAfterTheConsumerMoved(settledBy: String) throws {
        var s = movedWithTwoOnTheOldConnection { s in if settledBy == "namedFirst" { s.consumerAcks(2, upTo: 5) } }
        s.at(2)
        if settledBy == "resend" { s.relay(2, [4, 5]) }
        if settledBy == "named" { s.consumerAcks(2, upTo: 5) }
        s.relay(2, [6])
        s.consumerAcks(2, upTo: 6)
        let result = try TrafficScript.auditWithAcks(s)
        let settled = settledBy != "nothing"
        #expect(result.totals.ok == (settled ? 6 : 4) && result.totals.lost == 0, "\(result.totals)")
        #expect(result.totals.unconfirmed == (settled ? 0 : 2), "\(result.totals)")
        #expect(result.totals.duplicated == 0 && result.totals.reordered == 0, "\(result.totals)")
    }

    @Test(
        "seqs a reader the consumer left took are vouched for only by an ack naming one of them; a later ack vouching for another doubt leaves them unconfirmed (s61's naive gRPC run: 222-231 vouched for by an ack of 587), while other doubts below it are vouched for as before"
    )
    func leftUnreadNeedsItsOwnAck() throws {
        var s = movedWithTwoOnTheOldConnection()
        // Connection 2: 6 and 7 delivered, 8 and 9 taken after the consumer's close; its resume ack on connection 3
        // names 9.
        s.at(2)
        s.send(2, [6, 7, 8, 9])
        s.write(2, [6, 7, 8, 9])
        s.acknowledge(2, .downstream, upTo: Int64(TrafficScript.messages([6, 7]).count))
        s.add(2, .acknowledgedAfterClose(.client, upTo: Int64(TrafficScript.messages([6, 7, 8, 9]).count)))
        s.at(3)
        s.close(2)
        s.at(4)
        s.open(3)
        s.consumerAcks(3, upTo: 9)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 7 && result.totals.unconfirmed == 2 && result.totals.lost == 0, "4 and 5 unconfirmed: \(result.totals)")
    }

    @Test("what the consumer never acknowledges and nobody resends is lost (a TLS stack that drops after its close_notify)")
    func notCoveredIsLost() throws {
        var s = closedWithTwoTakenAfter()
        s.at(2)
        s.open(2)
        s.consumerAcks(2, upTo: 1)
        s.relay(2, [4, 5])
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 3)
        #expect(result.totals.lost == 2)
        #expect(result.anomalies.contains { $0.kind == .lost && $0.fromSeq == 2 && $0.toSeq == 3 })
    }

    @Test("an ack that a later delivered seq explains vouches for nothing: a producer that skipped them on resume is caught")
    func highestSeenAckDoesNotVouch() throws {
        var s = closedWithTwoTakenAfter()
        // The producer resumes past 2 and 3 (its bug); the consumer acks the highest seq it saw, 5.
        s.at(2)
        s.open(2)
        s.consumerAcks(2, upTo: 1)
        s.relay(2, [4, 5])
        s.consumerAcks(2, upTo: 5)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 3)
        #expect(result.totals.lost == 2)
    }

    @Test("resent on the next connection, they are delivered once: neither lost nor duplicated")
    func resentIsDeliveredOnce() throws {
        var s = closedWithTwoTakenAfter()
        s.at(2)
        s.open(2)
        s.consumerAcks(2, upTo: 1)
        s.relay(2, [2, 3, 4])
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 4 && result.totals.lost == 0)
        #expect(result.totals.duplicated == 0)
    }

    @Test("once the run is stopping no later ack can come: what the consumer's TCP took is delivered, as on a half-close")
    func stoppingTrustsTCP() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2, 3])
        s.write(1, [1, 2, 3])
        let one = Int64(TrafficScript.message(1).count)
        let three = Int64(TrafficScript.messages([1, 2, 3]).count)
        s.at(0.5)
        s.acknowledge(1, .downstream, upTo: one)
        s.at(0.6)
        s.add(0, .stopping)
        s.at(0.7)
        s.add(1, .acknowledgedAfterClose(.client, upTo: three))
        s.at(1)
        s.close(1)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 3 && result.totals.lost == 0)
    }

    @Test(
        "a message written to a connection that ended before its acknowledgement was read: the consumer's resume ack vouches for it, a later seq's does not"
    )
    func unacknowledgedAtTheCutIsVouchedFor() throws {
        var vouched = cutWithThreeInFlight()
        vouched.at(2)
        vouched.open(2)
        vouched.consumerAcks(2, upTo: 3)
        vouched.relay(2, [4, 5])
        let good = try TrafficScript.auditWithAcks(vouched)
        #expect(good.totals.ok == 5 && good.totals.lost == 0)
        var skipped = cutWithThreeInFlight()
        skipped.at(2)
        skipped.open(2)
        skipped.consumerAcks(2, upTo: 2)
        skipped.relay(2, [4, 5])
        skipped.consumerAcks(2, upTo: 5)
        let bad = try TrafficScript.auditWithAcks(skipped)
        #expect(bad.totals.ok == 4 && bad.totals.lost == 1)
    }

    @Test(
        "a producer that skipped the cut seq on resume, its consumer's ack for the next seq read before that seq's TCP acknowledgement: the skipped seq is lost, not vouched for"
    )
    func ackAheadOfItsAcknowledgement() throws {
        var s = cutWithThreeInFlight()
        s.at(2)
        s.open(2)
        s.consumerAcks(2, upTo: 2)
        // Seq 4 written; the consumer answers with ack 4 before the proxy sees its TCP take seq 4 (a loaded machine).
        s.send(2, [4])
        s.write(2, [4])
        s.at(2.1)
        s.consumerAcks(2, upTo: 4)
        s.at(2.2)
        s.acknowledge(2, .downstream)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 3 && result.totals.lost == 1, "\(result.totals)")
    }

    @Test(
        "a consumer that named its resume point on a new connection and then reset the old one, unread bytes past that point in it, threw them away: lost when nobody resends them; without that resume point they stay unconfirmed"
    )
    func resetAfterTheResumePointElsewhere() throws {
        for named in [true, false] {
            var s = TrafficScript()
            s.open(1)
            s.relay(1, [1, 2])
            s.consumerAcks(1, upTo: 2)
            s.send(1, [3])
            s.write(1, [3])  // held by a dead path, released when it came back: the consumer's TCP never said it took it
            s.at(1)
            s.open(2)
            if named { s.consumerAcks(2, upTo: 2) }  // its resume point, on the new connection
            s.at(1.1)
            // Its reset of the old connection (a socket closed with bytes unread): what went out to it is cut.
            s.add(1, .path(.acknowledgementsCut(.client, upTo: Int64(TrafficScript.messages([1, 2, 3]).count))))
            s.add(1, .closed(.client, .reset))
            s.add(1, .closed(.server, .reset))
            s.at(1.2)
            s.relay(2, [4, 5])  // the producer skipped 3 on resume
            s.consumerAcks(2, upTo: 5)
            let result = try TrafficScript.auditWithAcks(s)
            if named {
                #expect(result.totals.ok == 4 && result.totals.lost == 1 && result.totals.unconfirmed == 0, "\(result.totals)")
            } else {
                #expect(result.totals.ok == 4 && result.totals.lost == 0 && result.totals.unconfirmed == 1, "\(result.totals)")
            }
        }
    }

    /// s78h1 (grpcio through a partition on the kernel dead path, beside a CPU hog): the server's acks on its new call
    /// went past the seq its client skipped on resume before the old connection's reset reached the audit; the rule
    /// compared with the highest of them, and the skipped seq stayed unconfirmed.
    @Test(
        "a resume point named on a newer connection denies what the old one took past it, even when the consumer's later acks there, read before the old connection's reset, went past the skipped seq"
    )
    func resetAfterTheResumePointElsewhereAndLaterAcks() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.send(1, [3])  // read from the producer in a partition, held
        s.at(1)
        s.open(2)
        s.consumerAcks(2, upTo: 2)  // its resume point
        s.relay(2, [4, 5])  // the producer skipped 3 on resume
        s.consumerAcks(2, upTo: 5)  // the highest seq it processed, on the new connection
        s.at(1.05)
        s.write(1, [3])  // the held bytes reach the old connection's dead socket
        s.at(1.1)
        s.add(1, .path(.acknowledgementsCut(.client, upTo: Int64(TrafficScript.messages([1, 2, 3]).count))))
        s.add(1, .closed(.client, .reset))
        s.add(1, .closed(.server, .reset))
        s.close(2)
        let totals = try TrafficScript.auditWithAcks(s).totals
        #expect(totals.ok == 4 && totals.lost == 1 && totals.unconfirmed == 0, "\(totals)")
    }

    /// s79 (a grpcio server through a partition on the kernel dead path): seq 95, acknowledged by its TCP on the old
    /// call long before and never read, its resume point of 94 named on the new call before the old call's reset
    /// reached the audit; the client skipped 95 on resume. Read the other way round (the reset first), it was lost.
    @Test(
        "a resume point named on a newer connection denies what the old one's TCP took past it and its reset left unread, whether the audit reads the reset before or after that point",
        arguments: [false, true]
    )
    func resetAfterTheResumePointOfTakenBytes(resetFirst: Bool) throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.relay(1, [3])  // the consumer's TCP took 3; its application never read it
        s.at(1)
        s.open(2)
        func resetFirstConnection() {
            s.add(1, .closed(.client, .reset))
            s.add(1, .closed(.server, .reset))
        }
        if resetFirst { resetFirstConnection() }
        s.consumerAcks(2, upTo: 2)  // its resume point, on the newer connection
        s.relay(2, [4, 5])  // the producer skipped 3 on resume
        s.at(1.1)
        if !resetFirst { resetFirstConnection() }
        s.consumerAcks(2, upTo: 5)
        s.close(2)
        let totals = try TrafficScript.auditWithAcks(s).totals
        #expect(totals.ok == 4 && totals.lost == 1 && totals.unconfirmed == 0, "\(totals)")
    }

    /// The old connection's copies of 3-4, taken in a partition and reset past a resume point named elsewhere, are
    /// denied; the resend of 3-6 is delivered on the second connection, which the consumer then resets past its last
    /// ack there (2); its ack of 6 on a third connection vouches for that run. `cutAt` is where the first connection's
    /// cut comes: before the resend's delivery, after it, or after the second connection's reset.
    enum FirstCut: String, CaseIterable, CustomTestStringConvertible {
        case beforeTheResend, afterTheResend, afterTheSecondReset
        var testDescription: String { rawValue }
    }

    @Test(
        "a copy denied on a reset connection does not hold back the resend another connection delivered and a later ack vouched for, whichever the audit reads first",
        arguments: FirstCut.allCases
    )
    func denialIsOfItsOwnCopy(cutAt: FirstCut) throws {
        // s79 (the lines demo pair's phone's day on the kernel dead path): 421-431, taken by client-1's first connection
        // before the partition ended, were denied when it reset; their resend, delivered on its second connection, was
        // put in doubt when a heartbeat timeout reset that one too; its ack of 513 on the third vouched for 432-513 but
        // not 421-431: 11 lost that its log processed.
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.send(1, [3, 4])
        s.write(1, [3, 4])
        s.at(1)
        s.open(2)
        s.consumerAcks(2, upTo: 2)  // its resume point, on the newer connection
        func cutFirst() {
            s.add(1, .path(.acknowledgementsCut(.client, upTo: Int64(TrafficScript.messages([1, 2, 3, 4]).count))))
            s.add(1, .closed(.client, .reset))
            s.add(1, .closed(.server, .reset))
        }
        s.at(1.1)
        if cutAt == .beforeTheResend { cutFirst() }
        s.at(1.2)
        s.relay(2, [3, 4, 5, 6])
        if cutAt == .afterTheResend { cutFirst() }
        s.at(1.3)
        s.add(2, .closed(.client, .reset))
        s.add(2, .closed(.server, .reset))
        if cutAt == .afterTheSecondReset { cutFirst() }
        s.at(2)
        s.open(3)
        s.consumerAcks(3, upTo: 6)
        s.relay(3, [7])
        s.consumerAcks(3, upTo: 7)
        s.close(3)
        let totals = try TrafficScript.auditWithAcks(s).totals
        #expect(totals.ok == 7 && totals.lost == 0 && totals.unconfirmed == 0, "\(totals)")
    }

    @Test(
        "an ack naming a seq the consumer took on one connection before resetting it vouches for that connection's doubted run, not for what an earlier connection it also reset had taken"
    )
    func ackVouchesForItsOwnConnectionsRun() throws {
        // s67's whole-suite run: a gRPC server's stack took 228-234 on a call a goaway's grace then closed (doubted,
        // past its last ack, 227); later, on another connection, it took 368-380 past its ack of 367 before that one
        // was cut too; its ack naming 380 on a third connection vouched for 228-234 as well, which its log never had.
        var s = TrafficScript.proxiedPastTheLastAck([(.client, .reset), (.server, .reset)])
        s.relay(2, [5])
        s.consumerAcks(2, upTo: 5)
        s.relay(2, [6, 7])
        s.at(3)
        s.add(2, .closed(.client, .reset))
        s.add(2, .closed(.server, .reset))
        s.at(4)
        s.open(3)
        s.consumerAcks(3, upTo: 7)
        let result = try TrafficScript.auditWithAcks(s)
        #expect(result.totals.ok == 5 && result.totals.unconfirmed == 1, "\(result.totals)")
    }
}
