import ChaosAudit
import ChaosCore
import Testing

@Suite("Recovery analysis")
struct RecoveryTests {
    @Test("time to reconnect and to the first new message after a disconnect, and transit time")
    func reconnectAndResume() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, Array(1...5))
        s.at(0.002)
        s.deliver(1, Array(1...5))
        s.at(10)
        s.fault("disconnect", 0, started: true)
        s.close(1, .cutByFault)
        s.fault("disconnect", 0, started: false)
        s.at(10.5)
        s.open(2)
        s.at(11)
        s.relay(2, [5])  // a redelivery is not new
        s.at(11.25)
        s.relay(2, [6])
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.recovery.reconnectS.count == 1 && abs(result.recovery.reconnectS.max - 0.5) < 0.001)
        #expect(result.recovery.resumeS.count == 1 && abs(result.recovery.resumeS.max - 1.25) < 0.002)
        #expect(abs(result.recovery.transitS.p50 - 0.002) < 0.0001)
        let impact = try #require(result.faults.first)
        #expect(impact.kind == "disconnect" && impact.connectionsClosed == 1 && impact.streamsAffected == 1)
        #expect(result.connections.cutByFault == 1 && result.connections.opened == 2)
    }

    @Test(
        "once the pair recovered from a fault, a later close of a connection made since is not its doing; one it hit still is",
        arguments: [(10.5, false), (2.5, true)]
    )
    func recoveredFaultBlamesNoLaterClose(openedAt: Double, blamed: Bool) throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, Array(1...3))
        s.at(2)
        s.open(2)  // a second connection, hit by the partition only when it opened before it
        s.at(5)
        s.fault("partition", 0, started: true)
        s.at(7)
        s.close(1, .fin)  // the heartbeat notices
        s.at(10)
        s.fault("partition", 0, started: false)
        s.at(openedAt)
        s.open(3)
        s.at(11)
        s.relay(3, [4])  // resumed 4 s after the disruption
        let late: ConnectionID = openedAt > 5 ? 3 : 2
        s.at(20)
        s.relay(late, [5])
        s.at(25)
        s.close(late, .fin)  // a stalled machine's heartbeat timeout, 15 s after the partition
        s.at(25.5)
        s.open(4)
        s.at(26)
        s.relay(4, [6])
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        let impact = try #require(result.faults.first)
        #expect(impact.connectionsClosed == (blamed ? 2 : 1), "\(impact)")
        #expect(result.recovery.resumeS.count == (blamed ? 2 : 1))
        #expect(abs(result.recovery.resumeS.max - (blamed ? 19 : 4)) < 0.01, "\(result.recovery.resumeS)")
        #expect(result.totals.ok == 6 && result.totals.lost == 0)
    }

    @Test("connections the run itself closes while stopping are not blamed on the last fault")
    func stoppingIsNotAFault() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, Array(1...3))
        s.at(5)
        s.fault("disconnect", 0, started: true)
        s.close(1, .cutByFault)
        s.fault("disconnect", 0, started: false)
        s.at(5.1)
        s.open(2)
        s.relay(2, [4])
        s.at(9)
        s.add(0, .stopping)
        s.close(2, .fin)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.recovery.neverResumed == 0)
        #expect(result.faults.first?.connectionsClosed == 1)
        #expect(result.recovery.resumeS.count == 1)
    }

    @Test(
        "reconnects all inside one short window are flagged as a thundering herd; spread out they are not",
        arguments: [(0.001, true), (0.5, false)]
    )
    func herd(spacing: Double, herd: Bool) throws {
        var s = TrafficScript()
        for id in 1...6 as ClosedRange<UInt64> {
            s.open(id)
            s.relay(id, [1], stream: "s\(id)")
        }
        s.at(5)
        s.fault("disconnect", 0, started: true)
        for id in 1...6 as ClosedRange<UInt64> { s.close(id, .cutByFault) }
        s.fault("disconnect", 0, started: false)
        for index in 0..<6 {
            s.at(5.1 + Double(index) * spacing)
            s.open(UInt64(10 + index))
        }
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let spread = try #require(engine.finish().recovery.reconnectSpread.first)
        #expect(spread.attempts == 6 && spread.connectionsClosed == 6 && spread.herd == herd)
    }

    @Test(
        "three clients back together: a herd when they came at once (no backoff), not when their full-jitter draws met later",
        arguments: [(0.01, true), (0.3, false)]
    )
    func fewClientsTogether(after: Double, herd: Bool) throws {
        var s = TrafficScript()
        for id in 1...3 as ClosedRange<UInt64> {
            s.open(id)
            s.relay(id, [1], stream: "s\(id)")
        }
        s.at(5)
        s.fault("disconnect", 0, started: true)
        for id in 1...3 as ClosedRange<UInt64> { s.close(id, .cutByFault) }
        s.fault("disconnect", 0, started: false)
        for index in 0..<3 {
            s.at(5 + after + Double(index) * 0.01)
            s.open(UInt64(10 + index))
        }
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let spread = try #require(engine.finish().recovery.reconnectSpread.first)
        #expect(spread.attempts == 3 && spread.densest == 3 && spread.herd == herd)
    }

    @Test(
        "a half-open stall shorter than the detection window the pair's heartbeat showed is not held against it; one longer is, and all are when it noticed none"
    )
    func halfOpenJudgedAgainstTheHeartbeat() throws {
        func run(noticedPartition: Bool) throws -> RecoverySummary {
            var s = TrafficScript()
            s.open(1)
            s.relay(1, [1])
            s.at(2)
            s.fault("stall", 0, started: true)
            s.at(3.5)
            s.fault("stall", 0, started: false)
            s.at(10)
            s.fault("partition", 1, started: true)
            if noticedPartition {
                s.at(13)
                s.close(1, .fin)
            }
            s.at(16)
            s.fault("partition", 1, started: false)
            let engine = try AuditEngine(spec: ProtocolSpec())
            engine.ingest(s.events)
            return engine.finish().recovery
        }
        let noticing = try run(noticedPartition: true)
        #expect(noticing.noticedWithinS.map { abs($0 - 3) < 0.01 } == true)
        #expect(noticing.halfOpen.first { $0.kind == "stall" }?.unnoticed == 1)
        #expect(noticing.missedHalfOpens.isEmpty, "a 1.5 s stall is shorter than the 3 s the heartbeat needs")
        let blind = try run(noticedPartition: false)
        #expect(blind.noticedWithinS == nil)
        #expect(blind.missedHalfOpens.map(\.kind) == ["stall", "partition"])
    }

    /// A NAT's death is silent: what counts is whether the producer sent into the dead mapping and got nothing
    /// through since. Three streams on three connections the NAT forgot at 10 s: `stuck` sends into it and nothing of
    /// it arrives again (an app hung on the dead connection), `back` sends into it and resends on a new connection,
    /// `quiet` had nothing more to send.
    @Test(
        "a stream stuck on a connection a NAT forgot never resumed; one that resent on a new connection resumed; one that stayed quiet was not interrupted"
    )
    func natDeathNeverResumed() throws {
        var s = TrafficScript()
        s.fault("nat", 0, started: true)
        for (id, stream) in [(1, "stuck"), (2, "back"), (3, "quiet")] as [(ConnectionID, String)] {
            s.open(id)
            s.relay(id, [1, 2], stream: stream)
        }
        s.at(10)
        for id: ConnectionID in 1...3 { s.add(id, .path(.natExpired(idleTimeout: 3_000_000_000, idleFor: 1_000_000_000))) }
        s.send(1, [3], stream: "stuck")
        s.send(2, [3], stream: "back")
        s.at(13)
        s.open(4)
        s.relay(4, [3, 4], stream: "back")
        s.at(20)
        s.fault("nat", 0, started: false)
        s.add(0, .stopping)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.recovery.neverResumed == 1, "the stuck stream alone")
        #expect(result.recovery.resumeS.count == 1 && abs(result.recovery.resumeS.max - 3) < 0.01, "back resumed 3 s after")
        let impact = try #require(result.faults.first { $0.kind == "nat" })
        #expect(impact.streamsAffected == 3 && impact.neverResumed == 1)
    }

    @Test("a half-open partition lasts until the pair closes the connection; one never noticed is reported")
    func halfOpen() throws {
        var s = TrafficScript()
        s.open(1)
        s.open(2)
        s.at(20)
        s.fault("partition", 1, started: true)
        s.at(35)
        s.add(1, .closed(.client, .fin))
        s.add(1, .closed(.server, .fin))
        s.at(40)
        s.fault("partition", 1, started: false)
        s.at(50)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.recovery.halfOpenS.count == 1 && abs(result.recovery.halfOpenS.max - 15) < 0.02)
        let record = try #require(result.recovery.halfOpen.first)
        #expect(record.connections == 2 && record.noticed == 1 && record.unnoticed == 1)
    }

    @Test(
        "a pair that takes a half-open connection's stream up on a new one noticed the old one then, though no close of it reached the proxy (on a dead path in the kernel an end's FIN waits behind its unacknowledged bytes)"
    )
    func movingOnIsNoticing() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.at(20)
        s.fault("partition", 1, started: true)
        s.at(23)
        s.open(2)
        s.send(2, [1], .upstream)  // the client's first message on its new connection (the old one carried downstream)
        s.at(40)
        s.fault("partition", 1, started: false)
        s.at(41)
        s.relay(2, [3, 4])
        s.add(1, .closed(.client, .fin))  // its FIN, once the path came back
        s.add(1, .closed(.server, .fin))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        let record = try #require(result.recovery.halfOpen.first)
        #expect(record.connections == 1 && record.noticed == 1 && record.unnoticed == 0, "\(record)")
        #expect(result.recovery.halfOpenS.count == 1 && abs(result.recovery.halfOpenS.max - 3) < 0.01)
        #expect(result.recovery.noticedWithinS.map { abs($0 - 3) < 0.01 } == true)
    }

    /// `connections` connections open, then a partition (occurrence 1) over `seconds`; at its end the paths of
    /// `deadPaths` come back (``DeadPathSeen``, in the kernel or held in the proxy), then the fault's end is marked.
    static func partition(_ seconds: ClosedRange<Double>, connections: Int, deadPaths: [ConnectionID], inKernel: Bool) -> TrafficScript {
        var s = TrafficScript()
        for id in 1...ConnectionID(connections) { s.open(id) }
        s.at(seconds.lowerBound)
        s.fault("partition", 1, started: true)
        s.at(seconds.upperBound)
        let quiet = DeadPathLeg(sent: 0, acknowledged: 0, retransmissions: 3)
        let lasted = Int64((seconds.upperBound - seconds.lowerBound) * 1e9)
        for id in deadPaths {
            s.add(id, .path(.deadPathSeen(DeadPathSeen(lasted: lasted, inKernel: inKernel, client: quiet, server: quiet))))
        }
        s.fault("partition", 1, started: false)
        return s
    }

    @Test(
        "on a dead path in the kernel, what the pair did in a partition reaches the proxy after it: a close that comes once the path is back was a notice within the partition; a connection that shows nothing for as long again was ridden out"
    )
    func kernelDeadPathNoticeArrivesAfterTheEnd() throws {
        func record(inKernel: Bool) throws -> HalfOpenRecord {
            // The path came back for 1 and 2 (3 was held in the proxy), then the fault's end was marked.
            var s = Self.partition(20...25, connections: 3, deadPaths: [1, 2], inKernel: inKernel)
            s.at(25.3)
            s.add(1, .closed(.client, .fin))  // its FIN, which waited behind its unacknowledged heartbeat
            s.at(27)
            s.add(3, .closed(.client, .fin))  // after a partition held in the proxy: not a notice in it
            s.at(31)
            s.open(4)
            s.at(40)
            let engine = try AuditEngine(spec: ProtocolSpec())
            engine.ingest(s.events)
            let result = engine.finish()
            #expect(result.recovery.halfOpenS.max < 5.01, "a notice after the end is one within it: \(result.recovery.halfOpenS)")
            return try #require(result.recovery.halfOpen.first)
        }
        let kernel = try record(inKernel: true)
        #expect(kernel.connections == 3 && kernel.noticed == 1 && kernel.unnoticed == 2, "\(kernel)")
        #expect(abs(kernel.longestS - 5) < 0.01, "\(kernel)")
        let held = try record(inKernel: false)
        #expect(held.connections == 3 && held.noticed == 0 && held.unnoticed == 3, "\(held)")
    }

    @Test(
        "the run's stop inside a kernel dead path's wait for a notice is not the pair noticing: its closes settle nothing, and the connections count as never noticed"
    )
    func stopInsideTheNoticeWait() throws {
        var s = Self.partition(20...25, connections: 2, deadPaths: [1, 2], inKernel: true)
        s.at(27)  // the run ends 2 s after the partition, inside the 5 s it waits for what the pair did in it
        s.add(0, .stopping)
        s.at(27.2)
        s.add(1, .closed(.client, .fin))
        s.add(2, .closed(.client, .reset))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let record = try #require(engine.finish().recovery.halfOpen.first)
        #expect(record.connections == 2 && record.noticed == 0 && record.unnoticed == 2, "\(record)")
    }

    @Test(
        "what each end's TCP met on a partition's dead paths counts for that partition: bytes sent into it, none acknowledged on the kernel path, the proxy's retransmissions, and which end gave up first"
    )
    func deadPathFiguresPerFault() throws {
        var s = TrafficScript()
        s.open(1)
        s.open(2)
        s.at(20)
        s.fault("partition", 1, started: true)
        s.at(24)
        // Connection 1: the client reset it 3 s in; connection 2: nobody closed it, the path came back at 29 s.
        let reset = DeadPathLeg(sent: 4_000, acknowledged: 0, retransmissions: 0, closedAfter: 3_000_000_000, closedHow: .reset)
        let quiet = DeadPathLeg(sent: 0, acknowledged: 0, retransmissions: 5)
        s.add(1, .path(.deadPathSeen(DeadPathSeen(lasted: 4_000_000_000, inKernel: true, client: reset, server: quiet))))
        s.at(29)
        let rode = DeadPathLeg(sent: 1_000, acknowledged: 512, retransmissions: 2)
        s.add(2, .path(.deadPathSeen(DeadPathSeen(lasted: 9_000_000_000, inKernel: true, client: rode, server: quiet))))
        s.fault("partition", 1, started: false)
        s.at(40)
        s.fault("latency", 2, started: true)
        s.at(41)
        // A NAT of the baseline (no fault of its kind on): counted for none.
        s.add(2, .path(.deadPathSeen(DeadPathSeen(lasted: 500_000_000, inKernel: true, client: rode, server: quiet))))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        let figures = try #require(result.faults.first { $0.kind == "partition" }?.deadPath)
        #expect(figures.connections == 2 && figures.inKernel)
        #expect(figures.client.sentBytes == 5_000 && figures.client.acknowledgedToThemBytes == 0)
        #expect(figures.client.acknowledgedByThemBytes == 512 && figures.server.proxyRetransmissions == 10)
        #expect(figures.client.closedReset == 1 && figures.client.closedFirst == 1 && figures.server.closedFirst == 0)
        #expect(figures.neitherClosed == 1)
        #expect(result.faults.first { $0.kind == "latency" }?.deadPath == nil)
    }

    /// How many connections a partition of `mark` from 20 s to 40 s left half-open (and unnoticed), of `count` opened
    /// before it through proxy `p`.
    static func halfOpens(_ mark: FaultMark, of count: ConnectionID) throws -> (connections: Int, unnoticed: Int) {
        var s = TrafficScript()
        for id in 1...count { s.open(id) }
        s.at(20)
        s.add(0, .faultStarted(mark))
        s.at(40)
        s.add(0, .faultEnded(mark))
        s.at(50)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let records = engine.finish().recovery.halfOpen
        return (records.reduce(0) { $0 + $1.connections }, records.reduce(0) { $0 + $1.unnoticed })
    }

    @Test("a partition scoped to a proxy no connection went through leaves nothing half-open; scoped to theirs, it does")
    func halfOpenFollowsTheProxy() throws {
        for (proxy, expected) in [("other", 0), ("p", 2)] {
            let found = try Self.halfOpens(FaultMark(kind: "partition", occurrence: 1, detail: "", proxy: proxy), of: 2)
            #expect(found == (expected, expected), "scoped to \(proxy): \(found)")
        }
    }

    @Test("a partition aimed at some connections (targets: count, fraction, each) judges the half-opens of those alone")
    func halfOpenFollowsTheTargets() throws {
        let draw = ConnectionDraw(probability: 0.5, seed: 11)
        let drawn = [ConnectionID(1), 2, 3, 4].filter(draw.reaches).count
        let cases: [(FaultMark, Int)] = [
            (FaultMark(kind: "partition", occurrence: 1, detail: "", connections: [2]), 1),
            (FaultMark(kind: "partition", occurrence: 1, detail: "", connections: []), 0),
            (FaultMark(kind: "partition", occurrence: 1, detail: "", draw: draw), drawn),
            (FaultMark(kind: "partition", occurrence: 1, detail: ""), 4),
        ]
        #expect(drawn > 0 && drawn < 4, "the draw reaches some of the four: \(drawn)")
        for (mark, expected) in cases {
            let found = try Self.halfOpens(mark, of: 4)
            #expect(found == (expected, expected), "\(mark): \(found)")
        }
    }

    @Test("a connection that rides out a short stall is half-open for exactly the stall, not until it later closes")
    func rodeOutStall() throws {
        var s = TrafficScript()
        s.open(1)
        s.at(10)
        s.fault("stall", 0, started: true)
        s.at(11.5)
        s.fault("stall", 0, started: false)
        s.at(30)
        s.add(1, .closed(.client, .fin))
        s.add(1, .closed(.server, .fin))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let record = try #require(engine.finish().recovery.halfOpen.first)
        #expect(record.noticed == 0 && record.unnoticed == 1)
        #expect(abs(record.longestS - 1.5) < 0.001)
    }

    @Test("a connection one end closed before a partition is being torn down, not half-open, even if its other leg closes after")
    func halfClosedIsNotHalfOpen() throws {
        var s = TrafficScript()
        s.open(1)
        s.open(2)
        s.at(1)
        s.add(1, .closed(.client, .fin))  // the client gave up just before the partition; its FIN is held
        s.at(1.01)
        s.fault("partition", 0, started: true)
        s.at(3)
        s.add(2, .closed(.client, .fin))  // the other client's heartbeat notices
        s.at(6)
        s.fault("partition", 0, started: false)
        s.at(6.1)
        s.add(1, .closed(.server, .fin))  // the held FIN reaches the server
        s.add(2, .closed(.server, .fin))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let record = try #require(engine.finish().recovery.halfOpen.first)
        #expect(record.connections == 1 && record.noticed == 1 && record.unnoticed == 0, "\(record)")
    }

    @Test("after both sides' FINs, what the proxy still held is delivered on the same connection, and it is not live")
    func deliveriesAfterBothFINs() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2, 3])  // read from the server, held by a partition
        s.at(1)
        s.add(1, .closed(.client, .fin))
        s.add(1, .closed(.server, .fin))
        s.at(2)
        s.deliver(1, [1, 2, 3])  // the backlog reaches the half-closed client
        s.at(3)
        s.fault("partition", 0, started: true)
        s.at(4)
        s.fault("partition", 0, started: false)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.totals.ok == 3 && result.totals.lost == 0 && result.totals.recovered == 0)
        #expect((result.recovery.halfOpen.first?.connections ?? 0) == 0, "a closed connection counted as live")
    }

    @Test("a connection closed on both sides retires after the grace: what never arrived by then is lost")
    func retiresAfterGrace() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2])
        s.deliver(1, [1])
        s.at(1)
        s.close(1, .fin)
        s.at(100)
        s.open(2)
        s.relay(2, [3])  // long after: connection 1 has retired
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let snapshot = engine.snapshot()
        #expect(snapshot.totals.lost == 1, "seq 2, cut in flight, should be lost once connection 1 retired")
        #expect(engine.finish().totals.lost == 1)
    }
}
