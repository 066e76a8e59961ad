import ChaosAudit
import ChaosCore
import Testing

/// The audit's view of the mobile path: the proxy's path events per connection, whether the pair noticed a NAT that
/// forgot its connection, and the keepalive it used (its quiet gaps) judged against the NAT timeout and radio tail.
@Suite("Mobile path in the audit")
struct PathTrackerTests {
    @Test("a connection a NAT forgot, noticed by the pair 4 s later, and one it never noticed: counts, times and a finding that names the timeout")
    func natDeathsAndNotice() throws {
        var s = TrafficScript()
        s.open(1)
        s.open(2)
        s.relay(1, [1])
        s.relay(2, [1], stream: "t")
        // Quiet for 35 s: a 30 s NAT forgot both; their keepalives met the dead mappings at 36 s.
        s.at(36)
        s.add(1, .path(.natExpired(idleTimeout: 30_000_000_000, idleFor: 5_000_000_000)))
        s.add(2, .path(.natExpired(idleTimeout: 30_000_000_000, idleFor: 5_000_000_000)))
        s.at(35)
        s.at(40)
        s.close(1, .fin)
        s.at(50)
        s.add(0, .stopping)
        s.close(2, .fin)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.pathLimits = PathLimits(natIdleTimeout: 30_000_000_000)
        engine.ingest(s.events)
        let path = try #require(engine.finish().path)
        #expect(path.natExpired == 2 && path.natNoticed == 1)
        #expect(abs(path.natNoticedS.max - 9) < 0.01, "expired at 31 s, closed at 40 s")
        #expect(path.connections.map(\.connection) == [1, 2])
        #expect(path.connections[0].natExpiredAtS.map { abs($0 - 31) < 0.01 } == true && path.connections[1].natNoticedAfterS == nil)
        #expect(path.natIdleTimeoutS == 30)
        #expect(path.findings.count == 1)
        #expect(path.findings.first?.contains("2 connection(s) went quiet past the NAT's 30 s idle timeout") == true, "\(path.findings)")
    }

    @Test("promotions and retransmissions are summed per connection and in all")
    func promotionsAndRetransmissions() throws {
        var s = TrafficScript()
        s.open(1)
        s.add(1, .path(.radioPromotion(waited: 260_000_000)))
        s.add(1, .path(.retransmission(.upstream, delay: 200_000_000)))
        s.add(1, .path(.retransmission(.downstream, delay: 400_000_000)))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let path = try #require(engine.finish().path)
        #expect(path.radioPromotions == 1 && abs(path.radioPromotionS - 0.26) < 1e-9)
        #expect(path.retransmissions == 2 && abs(path.retransmissionStallS - 0.6) < 1e-9)
        #expect(path.connections.first?.retransmissions == 2)
    }

    @Test("a run with no mobile path has no path section; one under a radio judges the keepalive only when the messages are rarer than the tail")
    func radioFinding() throws {
        let plain = try AuditEngine(spec: ProtocolSpec())
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1])
        plain.ingest(s.events)
        #expect(plain.finish().path == nil)

        // Messages every second for 3 s, then only a keepalive byte every 2 s for 30 s: under an 11.5 s tail, the
        // keepalive alone keeps the radio up.
        func run(keepaliveOnly: Bool) throws -> PathSummary {
            var s = TrafficScript()
            s.open(1)
            for second in 0..<3 {
                s.at(Double(second))
                s.relay(1, [second + 1])
            }
            var time = 3.0
            while time < 33 {
                time += keepaliveOnly ? 2 : 1
                s.at(time)
                if keepaliveOnly { s.sendBytes(1, .upstream, Array("PING\n".utf8)) } else { s.relay(1, [Int(time)]) }
            }
            let engine = try AuditEngine(spec: ProtocolSpec())
            engine.pathLimits = PathLimits(radioTail: 11_500_000_000)
            engine.ingest(s.events)
            return try #require(engine.finish().path)
        }
        let pings = try run(keepaliveOnly: true)
        #expect(pings.findings.contains { $0.contains("keepalive never lets the radio idle") }, "\(pings.findings)")
        let data = try run(keepaliveOnly: false)
        #expect(data.findings.isEmpty, "messages every second keep any radio busy: \(data.findings)")
    }
}
