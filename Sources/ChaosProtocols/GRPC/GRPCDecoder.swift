import ChaosCore

/// One leg of a gRPC connection (cleartext HTTP/2): an ``HTTP2DirectionDecoder`` for the frames and HPACK, and
/// per HTTP/2 stream a ``GRPCMessageSplitter`` for the length-prefixed messages, whatever the DATA frames' and
/// the reads' boundaries. Compressed messages are inflated (`gzip`, `deflate`). The calls themselves (path,
/// metadata) live in the connection's ``GRPCSession``: the client's legs open them, the server's legs find them.
final class GRPCDecoder: LegDecoder {
    private var http2: HTTP2DirectionDecoder
    private let session: GRPCSession
    /// 0 when the client sends this leg's bytes, 1 for the server.
    private let slot: Int
    private let cap: Int
    /// Per HTTP/2 stream with a message under way in this leg.
    private var splitters: [UInt32: GRPCMessageSplitter] = [:]
    /// Streams this leg's sender reset (RST_STREAM): DATA it still sends on them is not a message of the call.
    /// Bounded: the lowest ids go first (stream ids only grow).
    private var resetStreams: Set<UInt32> = []
    private static let resetStreamLimit = 1024
    /// On the server's leg, the last client stream a GOAWAY it carried named as processed: the client's application
    /// never gets what comes on a later stream (its client takes such a call for unprocessed and retries it, RFC 9113
    /// section 6.8), though a server that had not sent the GOAWAY itself (the proxy's `goaway` fault) may answer it.
    private var lastProcessedStream = UInt32.max
    /// Bytes fed before the current input (HTTP/2 events carry offsets from the leg's first byte).
    private var fed: Int64 = 0
    private var gzip: Inflater?
    private var deflate: Inflater?
    /// An inflated message (bounded by `cap`).
    private var inflated: [UInt8] = []

    init(upstream: Bool, session: GRPCSession, cap: Int) {
        http2 = HTTP2DirectionDecoder(sender: upstream ? .client : .server)
        self.session = session
        slot = upstream ? 0 : 1
        self.cap = cap
    }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        http2.maxFrameSize = session.maxFrameSize[slot]
        let base = fed
        fed += Int64(input.count)
        let events = http2.feed(UnsafeRawBufferPointer(input))
        for event in events {
            switch event {
            case .data(let stream, let payload, let endStream, let endOffset):
                let end = Int(endOffset - base)
                // The frame's messages first: a server's last DATA frame ends its call once they are handed over.
                defer { if endStream { ended(stream, at: end, output) } }
                if stream <= lastProcessedStream, let call = session.call(stream), call.audited,
                    resetStreams.isEmpty || !resetStreams.contains(stream)
                {
                    // Most DATA frames start a message: no partial one waits, and no dictionary is touched.
                    var splitter =
                        splitters.isEmpty
                        ? GRPCMessageSplitter()
                        : splitters.removeValue(forKey: stream) ?? GRPCMessageSplitter()
                    payload.withUnsafeBufferPointer { bytes in
                        splitter.feed(bytes, cap: cap) { piece in
                            switch piece {
                            case .message(let body, let compressed):
                                message(body, compressed: compressed, call: call, end: end, output)
                            case .oversized(let length):
                                output(.event(.oversized(bytes: length, end: end), at: end))
                            }
                        }
                    }
                    if !endStream, splitter.hasPartialMessage { splitters[stream] = splitter }
                }
            case .headers(let stream, let fields, let endStream):
                headers(stream, fields, at: input.count, output)
                if endStream {
                    splitters[stream] = nil
                    ended(stream, at: input.count, output)
                }
            case .reset(let stream, let code):
                splitters[stream] = nil
                ended(stream, at: input.count, reset: true, output)
                resetStreams.insert(stream)
                if resetStreams.count > Self.resetStreamLimit, let oldest = resetStreams.min() { resetStreams.remove(oldest) }
                output(.event(.coded("streamResets", code: HTTP2ErrorCode.name(code)), at: input.count))
            case .goaway(let last, let code, _):
                if slot == 1 { lastProcessedStream = min(lastProcessedStream, last) }
                output(.event(.coded("goaways", code: HTTP2ErrorCode.name(code), proxyMayWrite: true), at: input.count))
            case .ping(let ack, let opaque):
                output(.event(.keepalive(ack: ack, opaque: opaque), at: input.count))
            case .settings(ack: false, let values):
                // The largest frame this leg's sender accepts is the largest its peer may send.
                for setting in values where setting.identifier == 5 {
                    session.maxFrameSize[1 - slot] = max(16_384, Int(setting.value))
                }
            case .settings(ack: true, _):
                break
            case .preface:
                // On the server's leg, the preface is its 101 to an h2c upgrade.
                if slot == 1 { output(.event(.counted("upgrades"), at: input.count)) }
            case .protocolError(let offset, let reason):
                splitters = [:]
                output(.problem(.protocolError(reason), at: max(0, min(input.count, Int(offset - base)))))
            }
        }
    }

    /// This leg's sender ended its side of `stream` (END_STREAM) or reset it. The server's end, or either side's reset,
    /// ends the call: its sender reads nothing more of it (a client's END_STREAM only ends its requests).
    private func ended(_ stream: UInt32, at: Int, reset: Bool = false, _ output: (DecoderOutput) -> Void) {
        guard slot == 1 || reset, let call = session.call(stream), !call.ended else { return }
        call.ended = true
        call.endedBy = slot == 1 ? .server : .client
        call.endedAbortively = reset
        if call.audited { output(.callEnded(call, at: at)) }
    }

    private func headers(_ stream: UInt32, _ fields: [HTTP2HeaderField], at: Int, _ output: (DecoderOutput) -> Void) {
        if slot == 0 {
            if session.open(stream, fields: fields).isNew { output(.event(.counted("calls"), at: at)) }
            return
        }
        // The server's response headers (its encoding), or trailers (or a trailers-only response) with the status.
        if let encoding = fields.first(where: { $0.name == "grpc-encoding" })?.value { session.call(stream)?.encodings[1] = encoding }
        if let status = fields.first(where: { $0.name == "grpc-status" }) {
            output(.event(.coded("grpcStatuses", code: GRPCStatusName.name(Int(status.value) ?? -1)), at: at))
        }
    }

    /// Hands over one message, inflated first when its compressed flag is set.
    private func message(
        _ body: UnsafeBufferPointer<UInt8>,
        compressed: Bool,
        call: GRPCCall,
        end: Int,
        _ output: (DecoderOutput) -> Void
    ) {
        guard compressed else { return output(.callMessage(body, end: end, call: call)) }
        let encoding = call.encodings[slot] ?? "identity"
        let inflater: Inflater?
        switch encoding {
        case "gzip":
            if gzip == nil { gzip = Inflater(gzip: true) }
            inflater = gzip
        case "deflate":
            if deflate == nil { deflate = Inflater(gzip: false) }
            inflater = deflate
        default:
            return output(
                .event(
                    .unreadable(
                        reason: "a message compressed with grpc-encoding '\(encoding)', which the audit cannot inflate (gzip and deflate only)"
                    ),
                    at: end
                )
            )
        }
        guard let inflater else { return output(.event(.unreadable(reason: "zlib could not start"), at: end)) }
        inflated.removeAll(keepingCapacity: true)
        var over = false
        let cap = self.cap
        let ok = inflater.inflate(body) { chunk in
            guard !over else { return }
            if inflated.count + chunk.count > cap {
                over = true
                return
            }
            inflated.append(contentsOf: chunk)
        }
        inflater.reset()
        if over { return output(.event(.oversized(bytes: cap + 1, end: end), at: end)) }
        guard ok else {
            return output(.event(.unreadable(reason: "a message flagged compressed that does not inflate as \(encoding)"), at: end))
        }
        inflated.withUnsafeBufferPointer { output(.callMessage($0, end: end, call: call)) }
    }

    var hasPartialMessage: Bool { splitters.values.contains { $0.hasPartialMessage } }

    /// An audited call that the server never ended and no one reset (past a GOAWAY's last stream, the client retries
    /// its calls elsewhere: those do not count).
    var leavesWorkOpen: Bool { session.hasOpenCalls(upTo: lastProcessedStream) }

    func dropPartial() { splitters = [:] }
}
