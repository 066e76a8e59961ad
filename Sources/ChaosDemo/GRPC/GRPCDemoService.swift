import GRPCCore

/// The server side of `Exchange`: each call carries one stream from its HELLO on; the downstream is produced at
/// the configured rate while the call carries the stream, every upstream MSG is answered with a cumulative ACK.
/// A newer call for the same stream ends this one (its outbox is finished), as a TCP takeover does.
struct GRPCDemoService: Chaos_Demo_V1_Stream.SimpleServiceProtocol {
    let streams: GRPCServerStreams
    /// Downstream messages per second on each stream (0: none).
    let rate: Double

    func exchange(
        request: RPCAsyncSequence<Chaos_Demo_V1_Envelope, any Error>,
        response: RPCWriter<Chaos_Demo_V1_Envelope>,
        context: ServerContext
    ) async throws {
        let call = streams.nextCall()
        streams.log?.event("accepted", ["connection": call])
        // Bounded: past it the oldest messages stay queued for retransmission, not in this call's buffer.
        let (outbox, sending) = AsyncStream.makeStream(of: Chaos_Demo_V1_Envelope.self, bufferingPolicy: .bufferingOldest(4096))
        let streams = self.streams
        let rate = self.rate
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await envelope in outbox { try await response.write(envelope) }
                return false
            }
            group.addTask {
                var name: String?
                defer {
                    if let name { streams.ended(stream: name, call: call) }
                    streams.log?.event("disconnected", ["connection": call, "stream": name ?? ""])
                    sending.finish()
                }
                var producer: Task<Void, Never>?
                defer { producer?.cancel() }
                for try await envelope in request {
                    guard let message = envelope.wireMessage else { continue }
                    if message.kind == .hello, name == nil, let stream = message.stream {
                        name = stream
                        for reply in streams.hello(message, call: call, outbox: sending) { sending.yield(.init(reply)) }
                        if rate > 0 { producer = Task { await Self.produce(stream, call: call, rate: rate, streams, sending) } }
                    } else if let name, let ack = streams.received(message, stream: name) {
                        sending.yield(.init(ack))
                    }
                }
                return true
            }
            // Either the client's side ended or another call took the stream over: the call is over. A client that
            // ended its side (a clean stop) still reads: what is queued for it goes out first (the outbox is finished).
            if try await group.next() == true { _ = try await group.next() }
            group.cancelAll()
        }
    }

    private static func produce(
        _ name: String,
        call: Int,
        rate: Double,
        _ streams: GRPCServerStreams,
        _ sending: AsyncStream<Chaos_Demo_V1_Envelope>.Continuation
    ) async {
        let period = UInt64((1e9 / rate).rounded())
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: period)
            let out = streams.produce(stream: name, call: call)
            if out.isEmpty { return }
            for message in out { sending.yield(.init(message)) }
        }
    }
}
