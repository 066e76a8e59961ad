import ChaosAudit
import ChaosCore

/// Builds `TrafficEvent` sequences by hand: a live proxy's view (read from the producer, written to the consumer).
struct TrafficScript {
    private(set) var events: [TrafficEvent] = []
    var time: Int64 = 0

    static func message(_ seq: Int, stream: String = "s", type: String = "MSG") -> [UInt8] {
        Array("{\"type\":\"\(type)\",\"stream\":\"\(stream)\",\"seq\":\(seq),\"payload\":\"x\"}\n".utf8)
    }

    static func messages(_ seqs: [Int], stream: String = "s") -> [UInt8] { seqs.flatMap { message($0, stream: stream) } }

    mutating func at(_ seconds: Double) { time = Int64((seconds * 1e9).rounded()) }

    /// The events so far, leaving none (the byte counts carry on).
    mutating func takeEvents() -> [TrafficEvent] {
        defer { events = [] }
        return events
    }

    mutating func add(_ connection: ConnectionID, _ kind: TrafficEvent.Kind) {
        events.append(TrafficEvent(time: time, connection: connection, kind: kind))
    }

    mutating func open(_ connection: ConnectionID) {
        add(connection, .opened(ConnectionEndpoints(proxy: "p", client: "c", listen: "l", proxyLocal: "pl", server: "s")))
    }

    /// The proxy read `bytes` from the producer of `direction`.
    mutating func sendBytes(_ connection: ConnectionID, _ direction: Direction, _ bytes: [UInt8]) {
        add(connection, .read(direction.producer, bytes))
    }

    /// Bytes written to each consumer so far, per connection and side.
    private var writtenBytes: [String: Int64] = [:]

    /// The proxy wrote `bytes` to the consumer of `direction` and the consumer's TCP acknowledged them.
    mutating func deliverBytes(_ connection: ConnectionID, _ direction: Direction, _ bytes: [UInt8]) {
        writeBytes(connection, direction, bytes)
        acknowledge(connection, direction)
    }

    /// The proxy wrote `bytes` to the consumer of `direction` (not acknowledged yet).
    mutating func writeBytes(_ connection: ConnectionID, _ direction: Direction, _ bytes: [UInt8]) {
        add(connection, .written(direction.consumer, bytes))
        writtenBytes["\(connection)/\(direction.consumer)", default: 0] += Int64(bytes.count)
    }

    /// The consumer of `direction` acknowledged everything written to it (or its first `bytes` bytes).
    mutating func acknowledge(_ connection: ConnectionID, _ direction: Direction, upTo bytes: Int64? = nil) {
        let offset = bytes ?? writtenBytes["\(connection)/\(direction.consumer)", default: 0]
        add(connection, .acknowledged(direction.consumer, upTo: offset))
    }

    /// Writes messages `seqs` to the consumer of `direction` without their acknowledgement.
    mutating func write(_ connection: ConnectionID, _ seqs: [Int], _ direction: Direction = .downstream, stream: String = "s") {
        writeBytes(connection, direction, Self.messages(seqs, stream: stream))
    }

    mutating func send(_ connection: ConnectionID, _ seqs: [Int], _ direction: Direction = .downstream, stream: String = "s") {
        sendBytes(connection, direction, Self.messages(seqs, stream: stream))
    }

    mutating func deliver(_ connection: ConnectionID, _ seqs: [Int], _ direction: Direction = .downstream, stream: String = "s") {
        deliverBytes(connection, direction, Self.messages(seqs, stream: stream))
    }

    /// Read and written: what passes through untouched.
    mutating func relay(_ connection: ConnectionID, _ seqs: [Int], _ direction: Direction = .downstream, stream: String = "s") {
        send(connection, seqs, direction, stream: stream)
        deliver(connection, seqs, direction, stream: stream)
    }

    mutating func close(_ connection: ConnectionID, _ how: TrafficEvent.CloseKind = .fin) {
        add(connection, .closed(.client, how))
        add(connection, .closed(.server, how))
    }

    mutating func fault(_ kind: String, _ occurrence: Int, started: Bool) {
        let mark = FaultMark(kind: kind, occurrence: occurrence, detail: "")
        add(0, started ? .faultStarted(mark) : .faultEnded(mark))
    }
}

extension TrafficScript {
    /// The consumer of the downstream acknowledges, on `connection`, every downstream seq up to `seq` (an ACK message
    /// read from it and delivered to the producer).
    mutating func consumerAcks(_ connection: ConnectionID, upTo seq: Int) {
        let ack = Array("{\"type\":\"ACK\",\"stream\":\"s\",\"ack\":\(seq)}\n".utf8)
        sendBytes(connection, .upstream, ack)
        deliverBytes(connection, .upstream, ack)
    }

    /// The audit of `script` by a protocol whose consumers acknowledge with an `ack` field.
    static func auditWithAcks(_ script: TrafficScript) throws -> AuditResult {
        let engine = try AuditEngine(spec: ProtocolSpec(ack: "ack"))
        engine.ingest(script.events)
        return engine.finish()
    }
}

extension TrafficScript {
    /// Seqs 1-3 delivered to the client's TCP through a proxy, the client's acks up to 2, then `closes` on connection 1;
    /// connection 2 opens at 2 s.
    static func proxiedPastTheLastAck(_ closes: [(Side, TrafficEvent.CloseKind)]) -> TrafficScript {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2])
        s.consumerAcks(1, upTo: 2)
        s.relay(1, [3])
        s.at(1)
        for (side, how) in closes { s.add(1, .closed(side, how)) }
        s.at(2)
        s.open(2)
        return s
    }
}
