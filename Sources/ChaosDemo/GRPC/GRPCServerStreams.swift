import GRPCCore
import Synchronization

/// The gRPC server's per-stream state (it outlives calls and connections), shared by the calls that carry the
/// streams: the same rules as the TCP server's (``ServerEngine``): one live call per stream (a new HELLO takes
/// over), WELCOME with the last upstream seq processed, retransmission of what the client has not processed,
/// deduplication, a GAP when the downstream queue overflowed.
final class GRPCServerStreams: Sendable {
    struct Stream {
        var upstream = InboundSequencer()
        var downstream: OutboundQueue
        var resumes = true
        /// The call carrying the stream now, and how to end it when another takes over.
        var attached: (call: Int, outbox: AsyncStream<Chaos_Demo_V1_Envelope>.Continuation)?
    }

    private let state = Mutex<(streams: [String: Stream], calls: Int)>(([:], 0))
    let queueCapacity: Int
    let log: ProcessedLog?

    init(queueCapacity: Int, log: ProcessedLog?) {
        self.queueCapacity = queueCapacity
        self.log = log
    }

    /// A number for a new call.
    func nextCall() -> Int {
        state.withLock {
            $0.calls += 1
            return $0.calls
        }
    }

    /// HELLO on `call`: attaches the stream (ending the call that carried it), returns what to send first.
    func hello(_ message: WireMessage, call: Int, outbox: AsyncStream<Chaos_Demo_V1_Envelope>.Continuation) -> [WireMessage] {
        guard let name = message.stream, !name.isEmpty else { return [] }
        let (previous, replies) = state.withLock { state -> (Int?, [WireMessage]) in
            var stream = state.streams[name] ?? Stream(downstream: OutboundQueue(capacity: queueCapacity))
            let previous = stream.attached.map { $0.call }
            stream.attached?.outbox.finish()
            stream.attached = (call, outbox)
            stream.resumes = message.resume ?? true
            stream.upstream.deduplicates = stream.resumes
            var replies = [WireMessage(.welcome, stream: name, ack: stream.upstream.lastProcessed)]
            if stream.resumes {
                let (gap, resend) = stream.downstream.resume(peerAck: message.ack ?? 0)
                if let gap { replies.append(WireMessage(.gap, stream: name, from: gap.lowerBound, to: gap.upperBound)) }
                replies += resend.map { WireMessage.data(stream: name, direction: "down", seq: $0) }
            } else {
                stream.downstream.discardUnacknowledged()
            }
            state.streams[name] = stream
            return (previous, replies)
        }
        if let previous, previous != call { log?.event("takeover", ["stream": name, "connection": previous]) }
        log?.event(
            "resumed",
            [
                "stream": name, "connection": call, "peer_ack": message.ack ?? 0,
                "resent": replies.filter { $0.kind == .msg }.count,
            ]
        )
        return replies
    }

    /// A message the client sent on `stream`; returns the ACK to answer with, if any.
    func received(_ message: WireMessage, stream name: String) -> WireMessage? {
        switch message.kind {
        case .msg:
            guard let seq = message.seq else { return nil }
            // Accepted and logged under one lock: two calls of one stream (a takeover while the old call still reads
            // what its connection delivered) must not log their seqs in another order than they were accepted.
            let log = self.log
            let processed = state.withLock { state -> Bool in
                switch state.streams[name]?.upstream.accept(seq) {
                case nil, .duplicate?: return false
                case .processAfterHole(let missing)?:
                    log?.event("hole", ["dir": "up", "stream": name, "from": missing.lowerBound, "to": missing.upperBound])
                case .process?: break
                }
                log?.processed(direction: "up", stream: name, seq: seq)
                return true
            }
            guard processed else { return nil }
        case .gap:
            guard let to = message.to else { return nil }
            guard let skipped = state.withLock({ $0.streams[name]?.upstream.skip(through: to) }) else { return nil }
            log?.event("gap-received", ["dir": "up", "stream": name, "from": skipped.lowerBound, "to": skipped.upperBound])
        case .ack:
            if let ack = message.ack { state.withLock { $0.streams[name]?.downstream.acknowledge(upTo: ack) } }
            return nil
        default:
            return nil
        }
        return WireMessage(.ack, stream: name, ack: state.withLock { $0.streams[name]?.upstream.lastProcessed ?? 0 })
    }

    /// One downstream message for `stream` if `call` still carries it: the messages to send (a GAP first when the
    /// queue overflowed).
    func produce(stream name: String, call: Int) -> [WireMessage] {
        state.withLock { state -> [WireMessage] in
            guard var stream = state.streams[name], stream.attached?.call == call else { return [] }
            let (seq, dropped) = stream.downstream.append()
            var out: [WireMessage] = []
            if !stream.resumes {
                stream.downstream.discardUnacknowledged()
            } else if let dropped {
                out.append(WireMessage(.gap, stream: name, from: dropped.lowerBound, to: dropped.upperBound))
            }
            out.append(WireMessage.data(stream: name, direction: "down", seq: seq))
            state.streams[name] = stream
            return out
        }
    }

    /// The call ended: the stream is detached if it still carried it.
    func ended(stream name: String, call: Int) {
        state.withLock { state in
            if state.streams[name]?.attached?.call == call { state.streams[name]?.attached = nil }
        }
    }

    /// The status of a stream for tests.
    func status(of name: String, accepted: Int) -> DemoStreamStatus? {
        state.withLock { state in
            guard let stream = state.streams[name] else { return nil }
            return DemoStreamStatus(
                lastProcessedUp: stream.upstream.lastProcessed,
                lastAssignedDown: stream.downstream.lastAssigned,
                unacknowledgedDown: stream.downstream.unacknowledgedCount,
                attached: stream.attached != nil,
                connectionsAccepted: accepted
            )
        }
    }
}
