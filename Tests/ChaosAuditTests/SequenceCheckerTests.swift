import ChaosAudit
import ChaosCore
import Testing

/// One hand-built traffic story and the exact counts the checker must find.
struct CheckerCase: Sendable, CustomTestStringConvertible {
    var name: String
    var script: @Sendable () -> [TrafficEvent]
    var ok: Int64 = 0, lost: Int64 = 0, recovered: Int64 = 0, duplicated: Int64 = 0, redelivered: Int64 = 0
    var reordered: Int64 = 0, gaps: Int64 = 0, truncated: Int64 = 0

    var testDescription: String { name }

    static func story(_ build: @escaping @Sendable (inout TrafficScript) -> Void) -> @Sendable () -> [TrafficEvent] {
        {
            var script = TrafficScript()
            build(&script)
            return script.events
        }
    }
}

@Suite("Sequence checker")
struct SequenceCheckerTests {
    static let cases: [CheckerCase] = [
        CheckerCase(
            name: "a clean stream is all ok",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, Array(1...10))
                s.close(1)
            },
            ok: 10
        ),
        CheckerCase(
            name: "a hole below the highest seq is lost and one gap",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, [1, 2, 3, 5, 6])
            },
            ok: 5,
            lost: 1,
            gaps: 1
        ),
        CheckerCase(
            name: "a stream resumed one past where it should loses exactly 1",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, Array(1...5))
                s.close(1, .reset)
                s.at(1)
                s.open(2)
                s.relay(2, Array(7...9))
            },
            ok: 8,
            lost: 1,
            gaps: 1
        ),
        CheckerCase(
            name: "seqs cut in flight and retransmitted after reconnect are recovered, not lost",
            script: CheckerCase.story { s in
                s.open(1)
                s.send(1, Array(1...5))
                s.deliver(1, [1, 2, 3])
                s.close(1, .cutByFault)
                s.at(1)
                s.open(2)
                s.relay(2, [4, 5, 6])
            },
            ok: 6,
            recovered: 2
        ),
        CheckerCase(
            name: "a gap later filled by a retransmission after reconnect is recovered and reordered, not lost",
            script: CheckerCase.story { s in
                s.open(1)
                s.send(1, Array(1...5))
                s.deliver(1, [1, 2, 3])
                s.close(1, .reset)
                s.at(1)
                s.open(2)
                s.relay(2, [6])
                s.relay(2, [4, 5])
            },
            ok: 6,
            recovered: 2,
            reordered: 2,
            gaps: 1
        ),
        CheckerCase(
            name: "a second delivery on the same connection is duplicated",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, [1, 2, 3])
                s.relay(1, [2])
            },
            ok: 3,
            duplicated: 1
        ),
        CheckerCase(
            name: "a resume that repeats seqs on a new connection is redelivered",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, Array(1...5))
                s.close(1)
                s.at(2)
                s.open(2)
                s.relay(2, Array(4...7))
            },
            ok: 7,
            redelivered: 2
        ),
        CheckerCase(
            name: "a seq first delivered after a higher one is reordered",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, [1, 3, 2, 4])
            },
            ok: 4,
            reordered: 1,
            gaps: 1
        ),
        CheckerCase(
            name: "seqs sent and never delivered are lost at the end",
            script: CheckerCase.story { s in
                s.open(1)
                s.send(1, Array(1...5))
                s.deliver(1, [1, 2, 3])
                s.close(1, .reset)
            },
            ok: 3,
            lost: 2
        ),
        CheckerCase(
            name: "the run stopping the pair does not excuse what its shutdown dropped (a capture could not tell)",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, [1, 2])
                s.send(1, [3])
                s.add(0, .stopping)
                s.send(1, [4, 5])
                s.close(1, .reset)
            },
            ok: 2,
            lost: 3
        ),
        CheckerCase(
            name: "a frame cut by RST is truncated, not undecodable",
            script: CheckerCase.story { s in
                s.open(1)
                let bytes = TrafficScript.messages([1, 2])
                s.sendBytes(1, .downstream, bytes)
                s.deliverBytes(1, .downstream, Array(bytes[0..<(bytes.count - 20)]))
                s.close(1, .reset)
            },
            ok: 1,
            lost: 1,
            truncated: 1
        ),
        CheckerCase(
            name: "bytes split one at a time still frame correctly",
            script: CheckerCase.story { s in
                s.open(1)
                let bytes = TrafficScript.messages(Array(1...20))
                for byte in bytes { s.sendBytes(1, .downstream, [byte]) }
                for chunk in stride(from: 0, to: bytes.count, by: 7) {
                    s.deliverBytes(1, .downstream, Array(bytes[chunk..<min(bytes.count, chunk + 7)]))
                }
            },
            ok: 20
        ),
        CheckerCase(
            name: "two streams on one connection are audited apart",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, [1, 2], stream: "a")
                s.relay(1, [1, 3], stream: "b")
                s.relay(1, [3], stream: "a")
            },
            ok: 5,
            lost: 1,
            gaps: 1
        ),
        CheckerCase(
            name: "upstream and downstream of one stream are audited apart",
            script: CheckerCase.story { s in
                s.open(1)
                s.relay(1, [1, 2, 3], .upstream)
                s.relay(1, [1, 2], .downstream)
            },
            ok: 5
        ),
    ]

    @Test("every delivery class is counted exactly", arguments: cases)
    func classes(_ example: CheckerCase) throws {
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(example.script())
        let totals = engine.finish().totals
        #expect(totals.ok == example.ok)
        #expect(totals.lost == example.lost)
        #expect(totals.recovered == example.recovered)
        #expect(totals.duplicated == example.duplicated)
        #expect(totals.redelivered == example.redelivered)
        #expect(totals.reordered == example.reordered)
        #expect(totals.gaps == example.gaps)
        #expect(totals.truncated == example.truncated)
    }

    @Test("a gap anomaly names its seqs, its time and the fault active then")
    func gapAnomaly() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, Array(1...40))
        s.at(30)
        s.fault("handoff", 3, started: true)
        s.at(33.2)
        s.open(2)
        s.relay(2, [44, 45])
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        let gap = try #require(result.anomalies.first { $0.kind == .gap })
        #expect(gap.fromSeq == 41 && gap.toSeq == 43)
        #expect(gap.atS == 33.2)
        #expect(gap.fault == "handoff" && gap.faultOccurrence == 3 && gap.faultActive == true)
        #expect(result.totals.lost == 3)
        let lost = try #require(result.anomalies.first { $0.kind == .lost })
        #expect(lost.fromSeq == 41 && lost.toSeq == 43)
    }

    @Test("a checkpoint does not count seqs still in flight as lost; the end does")
    func checkpointVersusEnd() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, Array(1...10))
        s.deliver(1, Array(1...8))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let snapshot = engine.snapshot()
        #expect(snapshot.complete == false)
        #expect(snapshot.totals.lost == 0 && snapshot.totals.ok == 8 && snapshot.totals.sent == 10)
        let final = engine.finish()
        #expect(final.complete && final.totals.lost == 2)
        #expect(abs(final.totals.deliveryRatio - 0.8) < 1e-9)
    }

    @Test("a cumulative ack from the other direction leaves only later seqs unacked")
    func unacked() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, Array(1...5))
        let ack = Array("{\"type\":\"ACK\",\"stream\":\"s\",\"ack\":3}\n".utf8)
        s.sendBytes(1, .upstream, ack)
        s.deliverBytes(1, .upstream, ack)
        let engine = try AuditEngine(spec: ProtocolSpec(ack: "ack", ignore: ["type": ["ACK"]]))
        engine.ingest(s.events)
        let result = engine.finish()
        let downstream = try #require(result.streams.first { $0.direction == .downstream })
        #expect(downstream.counts.unacked == 2 && downstream.ackedUpTo == 3)
        #expect(result.messages.ignored == 2)
    }

    @Test("a stream may start at seq 0 with seq_start")
    func seqStartZero() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [0, 1, 2])
        let engine = try AuditEngine(spec: ProtocolSpec(), seqStart: 0)
        engine.ingest(s.events)
        let totals = engine.finish().totals
        #expect(totals.ok == 3 && totals.lost == 0 && totals.gaps == 0)
    }

    @Test("ignored types are not audited and do not count as anything")
    func ignoredTypes() throws {
        var s = TrafficScript()
        s.open(1)
        s.sendBytes(1, .upstream, Array("{\"type\":\"PING\"}\n{\"type\":\"HELLO\",\"stream\":\"s\",\"seq\":99}\n".utf8))
        s.relay(1, [1, 2])
        let engine = try AuditEngine(spec: ProtocolSpec(ignore: ["type": ["PING", "HELLO"]]))
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.messages.ignored == 2 && result.totals.ok == 2 && result.totals.lost == 0)
    }

    @Test("memory per stream grows with holes, not with messages")
    func boundedMemory() throws {
        let engine = try AuditEngine(spec: ProtocolSpec())
        var s = TrafficScript()
        s.open(1)
        engine.ingest(s.events)
        var seq = 1
        _ = s.takeEvents()
        for round in 0..<50 {
            let seqs = Array(seq..<(seq + 500))
            s.at(Double(round))
            s.relay(1, seqs)
            engine.ingest(s.takeEvents())
            seq += 500
        }
        let result = engine.finish()
        #expect(result.totals.ok == 25_000 && result.totals.lost == 0)
        #expect(result.activity.delivered.reduce(0, +) == 25_000)
    }
}
