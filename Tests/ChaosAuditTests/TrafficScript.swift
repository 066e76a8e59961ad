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

    /// The proxy wrote `bytes` to the consumer of `direction`.
    mutating func deliverBytes(_ connection: ConnectionID, _ direction: Direction, _ bytes: [UInt8]) {
        add(connection, .written(direction.consumer, bytes))
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
