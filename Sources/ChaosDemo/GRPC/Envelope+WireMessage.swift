/// The gRPC transport carries the same messages as the NDJSON lines: one ``WireMessage`` per `Envelope`.
extension Chaos_Demo_V1_Envelope {
    /// The envelope of a demo message (PING and PONG never travel: HTTP/2 keepalive is the heartbeat).
    init(_ message: WireMessage) {
        self.init()
        type = message.kind.rawValue
        stream = message.stream ?? ""
        seq = Int64(message.seq ?? 0)
        id = message.id ?? ""
        payload = message.payload ?? ""
        ack = Int64(message.ack ?? 0)
        from = Int64(message.from ?? 0)
        to = Int64(message.to ?? 0)
        resume = message.resume ?? false
    }

    /// The demo message it carries; nil for an unknown type.
    var wireMessage: WireMessage? {
        guard let kind = WireMessage.Kind(rawValue: type) else { return nil }
        return WireMessage(
            kind,
            stream: stream.isEmpty ? nil : stream,
            seq: seq == 0 ? nil : Int(seq),
            id: id.isEmpty ? nil : id,
            payload: payload.isEmpty ? nil : payload,
            ack: kind == .ack || kind == .hello || kind == .welcome ? Int(ack) : nil,
            from: kind == .gap ? Int(from) : nil,
            to: kind == .gap ? Int(to) : nil,
            resume: kind == .hello ? resume : nil
        )
    }
}
