import ChaosAudit
import ChaosCore
import Testing

/// "Delivered" means the consumer's TCP acknowledged the message's last byte, not that the proxy wrote it.
@Suite("Delivered = acknowledged by the consumer's TCP")
struct AcknowledgementTests {
    private func audit(_ script: TrafficScript, _ point: AuditEngine.DeliveryPoint = .acknowledged) throws -> AuditResult {
        let engine = try AuditEngine(spec: ProtocolSpec(ack: "ack"), deliveryPoint: point)
        engine.ingest(script.events)
        return engine.finish()
    }

    @Test("bytes flushed into a connection the consumer abandoned, answered with a reset, are not delivered")
    func flushedIntoDeadConnection() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2, 3])
        s.at(1)
        s.send(1, [4, 5, 6])
        s.write(1, [4, 5, 6])
        s.at(2)
        s.add(1, .closed(.client, .reset))
        s.add(1, .closed(.server, .reset))
        let result = try audit(s)
        #expect(result.totals.ok == 3)
        #expect(result.totals.lost == 3)
        // Before: counted delivered at the write, so a false "lost 0".
        let written = try audit(s, .written)
        #expect(written.totals.lost == 0 && written.totals.ok == 6)
    }

    @Test("what was written but never acknowledged and then resent on a new connection is recovered, not redelivered")
    func resentAfterReconnect() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2, 3])
        s.at(1)
        s.send(1, [4, 5])
        s.write(1, [4, 5])
        s.at(2)
        s.add(1, .closed(.client, .reset))
        s.add(1, .closed(.server, .cutByFault))
        s.at(3)
        s.open(2)
        s.relay(2, [4, 5, 6])
        let result = try audit(s)
        #expect(result.totals.ok == 6 && result.totals.lost == 0)
        #expect(result.totals.recovered == 2)
        #expect(result.totals.redelivered == 0)
        let written = try audit(s, .written)
        #expect(written.totals.redelivered == 2 && written.totals.recovered == 0)
    }

    @Test("an acknowledgement that ends inside a message delivers only the messages before it")
    func partialAcknowledgement() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2, 3, 4])
        s.write(1, [1, 2, 3, 4])
        let three = Int64(TrafficScript.messages([1, 2, 3]).count)
        s.at(0.5)
        s.acknowledge(1, .downstream, upTo: three + 5)
        s.at(1)
        s.add(1, .closed(.client, .reset))
        s.add(1, .closed(.server, .reset))
        let result = try audit(s)
        #expect(result.totals.ok == 3)
        #expect(result.totals.lost == 1)
    }

    @Test("a message split across writes is delivered once its last byte is acknowledged")
    func splitAcrossWrites() throws {
        var s = TrafficScript()
        let bytes = TrafficScript.messages([1])
        s.open(1)
        s.send(1, [1])
        s.writeBytes(1, .downstream, Array(bytes[..<10]))
        s.acknowledge(1, .downstream)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        #expect(engine.snapshot().totals.delivered == 0)
        var rest = TrafficScript()
        rest.writeBytes(1, .downstream, Array(bytes[10...]))
        rest.acknowledge(1, .downstream, upTo: Int64(bytes.count))
        engine.ingest(rest.events)
        #expect(engine.finish().totals.ok == 1)
    }

    @Test("the consumer's half-close does not end deliveries: acknowledgements after its FIN still count")
    func acknowledgedAfterFIN() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2])
        s.write(1, [1, 2])
        s.at(0.1)
        s.add(1, .closed(.client, .fin))
        s.at(0.2)
        s.acknowledge(1, .downstream)
        s.at(0.3)
        s.add(1, .closed(.server, .fin))
        let result = try audit(s)
        #expect(result.totals.ok == 2 && result.totals.lost == 0)
    }

    @Test("an acknowledgement that comes after the proxy cut the leg with a FIN still delivers, and is no recovery")
    func lateAcknowledgement() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1, 2])
        s.write(1, [1, 2])
        s.at(0.1)
        s.add(1, .closed(.client, .cutByFault))
        s.add(1, .closed(.server, .cutByFault))
        s.at(0.12)
        s.acknowledge(1, .downstream)
        let result = try audit(s)
        #expect(result.totals.ok == 2 && result.totals.lost == 0)
        #expect(result.totals.recovered == 0)
    }

    @Test("transit time is measured to the acknowledgement, not to the write")
    func transitToAcknowledgement() throws {
        var s = TrafficScript()
        s.open(1)
        s.send(1, [1])
        s.at(0.001)
        s.write(1, [1])
        s.at(0.250)
        s.acknowledge(1, .downstream)
        let transit = try audit(s).recovery.transitS
        #expect(transit.count == 1)
        #expect(abs(transit.max - 0.250) < 0.001)
    }

    @Test("a cumulative ack inside a message the consumer never took does not count")
    func unacknowledgedAckField() throws {
        func script(acknowledged: Bool) -> TrafficScript {
            var s = TrafficScript()
            s.open(1)
            s.relay(1, [1, 2, 3], .upstream)
            let first = Array("{\"type\":\"ACK\",\"stream\":\"s\",\"ack\":1}\n".utf8)
            s.sendBytes(1, .downstream, first)
            s.deliverBytes(1, .downstream, first)
            let ack = Array("{\"type\":\"ACK\",\"stream\":\"s\",\"ack\":3}\n".utf8)
            s.sendBytes(1, .downstream, ack)
            s.writeBytes(1, .downstream, ack)
            if acknowledged { s.acknowledge(1, .downstream) }
            s.at(1)
            s.add(1, .closed(.client, .fin))
            s.add(1, .closed(.server, .fin))
            return s
        }
        #expect(try audit(script(acknowledged: false)).totals.unacked == 2)
        #expect(try audit(script(acknowledged: true)).totals.unacked == 0)
    }

    @Test("acknowledgements from a capture release messages in write order, across many connections")
    func manyConnections() throws {
        var s = TrafficScript()
        for connection in ConnectionID(1)...20 {
            let first = Int(connection - 1) * 10 + 1
            s.open(connection)
            s.send(connection, Array(first..<(first + 10)))
            s.write(connection, Array(first..<(first + 10)))
        }
        for connection in ConnectionID(1)...20 where connection % 2 == 0 { s.acknowledge(connection, .downstream) }
        for connection in ConnectionID(1)...20 { s.close(connection, .reset) }
        let result = try audit(s)
        #expect(result.totals.ok == 100)
        #expect(result.totals.lost == 100)
        #expect(result.totals.gaps == 10)
    }
}

/// The written copy of a message reuses what was read from it (lines and length-prefixed framings, whose written
/// bytes are the read bytes) only when it is the same message: same end, length and bytes.
@Suite("Read copies: a written message is read again unless it is the one read")
struct ReadCopyTests {
    @Test("written bytes that differ from the read ones at the same offsets are read for what they say")
    func differentBytesAreReadAgain() throws {
        var s = TrafficScript()
        s.open(1)
        s.sendBytes(1, .downstream, Array("{\"stream\":\"s\",\"seq\":1}\n{\"stream\":\"s\",\"seq\":2}\n".utf8))
        s.writeBytes(1, .downstream, Array("{\"stream\":\"s\",\"seq\":1}\n{\"stream\":\"s\",\"seq\":3}\n".utf8))
        s.acknowledge(1, .downstream)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        let stream = try #require(result.streams.first { $0.stream == "s" })
        // Seq 3 was delivered, after a gap where seq 2 should be: had the written copy of the second message been
        // taken for the read one, seq 2 would count delivered and there would be no gap.
        #expect(stream.highestSeq == 3 && stream.counts.gaps == 1, "\(stream)")
    }

    @Test(
        "the read's own buffer handed over as the write (a whole read written at once) counts as read: alone, after a write in pieces, and with a message straddling reads"
    )
    func readBufferWrittenBack() throws {
        let bytes = TrafficScript.messages(Array(1...60))
        let reads = [Array(bytes[0..<700]), Array(bytes[700..<1_500]), Array(bytes[1_500...])]
        var s = TrafficScript()
        s.open(1)
        // First read: written in two copies of its own (not its buffer); then each read's very buffer.
        s.add(1, .read(.server, reads[0]))
        s.add(1, .written(.client, Array(reads[0][0..<300])))
        s.add(1, .written(.client, Array(reads[0][300...])))
        for read in reads.dropFirst() {
            s.add(1, .read(.server, read))
            s.add(1, .written(.client, read))
        }
        s.acknowledge(1, .downstream, upTo: Int64(bytes.count))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let totals = engine.finish().totals
        #expect(totals.sent == 60 && totals.ok == 60 && totals.lost == 0 && totals.duplicated == 0 && totals.gaps == 0, "\(totals)")
    }

    @Test("a read's buffer written back at another offset than it was read (the proxy dropped bytes before it) is read for what it says")
    func readBufferAtAnotherOffset() throws {
        let first = Array("{\"stream\":\"s\",\"seq\":1}\n".utf8)
        let second = Array("{\"stream\":\"s\",\"seq\":2}\n".utf8)
        var s = TrafficScript()
        s.open(1)
        s.add(1, .read(.server, first))
        s.add(1, .read(.server, second))
        // The first message never reaches the consumer; the second's buffer is written at offset 0, not 24.
        s.add(1, .written(.client, second))
        s.acknowledge(1, .downstream, upTo: Int64(second.count))
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        let stream = try #require(result.streams.first { $0.stream == "s" })
        #expect(stream.counts.delivered == 1 && stream.highestSeq == 2 && stream.counts.gaps == 1, "\(stream)")
    }

    @Test("the same bytes written in other pieces than they were read count exactly as read", arguments: [1, 7, 40, 4_096])
    func samePiecesOrNot(piece: Int) throws {
        let bytes = TrafficScript.messages(Array(1...50))
        var s = TrafficScript()
        s.open(1)
        s.sendBytes(1, .downstream, bytes)
        for start in stride(from: 0, to: bytes.count, by: piece) {
            s.writeBytes(1, .downstream, Array(bytes[start..<min(bytes.count, start + piece)]))
        }
        s.acknowledge(1, .downstream)
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let totals = engine.finish().totals
        #expect(totals.sent == 50 && totals.ok == 50 && totals.lost == 0 && totals.duplicated == 0)
    }
}
