/// What a leg decoder found in the bytes fed to it.
public enum DecoderOutput {
    /// A complete message: its body (valid only during the call) and the position in the input just past the
    /// last byte of its last frame, where the message ends on the wire. `binary`: a WebSocket binary message.
    case message(UnsafeBufferPointer<UInt8>, end: Int, binary: Bool)
    /// A complete gRPC message of `call` (which names its RPC, metadata and stream), as for `message`.
    case callMessage(UnsafeBufferPointer<UInt8>, end: Int, call: GRPCCall)
    /// A protocol event (a close frame, a ping, the upgrade handshake…) at `at`, a position in the input.
    case event(ProtocolEvent, at: Int)
    /// The bytes do not fit the protocol: the decoder stops there and ignores the rest of the leg.
    case problem(DecoderProblem, at: Int)
}

/// Something a protocol says about a connection that is not a message.
public enum ProtocolEvent: Equatable {
    /// The client's HTTP/1.1 Upgrade request (or the request that opened an SSE stream) was read (its target and
    /// headers are in the connection's session).
    case upgradeRequested
    /// The server accepted the upgrade (101 Switching Protocols).
    case upgraded
    /// The server answered the upgrade with another status: the leg carries no WebSocket frames.
    case upgradeFailed(status: Int)
    /// A close frame; `code` is nil when the frame had no status code (1005).
    case close(code: UInt16?, reason: String)
    /// A ping frame (a heartbeat).
    case ping
    /// A pong frame (a heartbeat's answer).
    case pong
    /// A message larger than the decoder's cap: counted, not buffered. `end` as for a message.
    case oversized(bytes: Int, end: Int)
    /// An HTTP/2 PING (a keepalive) or, with `ack`, its answer, with its 8 opaque bytes.
    case keepalive(ack: Bool, opaque: UInt64)
    /// A gRPC call began (its request headers).
    case callStarted
    /// An HTTP/2 GOAWAY: the last stream its sender processes and the error code.
    case goaway(lastStream: UInt32, code: UInt32)
    /// An HTTP/2 RST_STREAM with its error code.
    case streamReset(code: UInt32)
    /// A gRPC call ended with `grpc-status` in its trailers.
    case grpcStatus(code: Int)
    /// One of the plug-in's named counters (``ProtocolPlugin/counters``) goes up by one: how a plug-in counts its
    /// own events (`sseResumes`) without a case of its own here.
    case counted(String)
    /// A message that cannot be read (compressed in an encoding the audit does not inflate, or not inflating).
    case unreadable(reason: String)
}

/// Why a leg's bytes do not fit the declared protocol.
public enum DecoderProblem: Equatable {
    /// Lines or length-prefixed framing does not fit.
    case framing(FrameSplitter.Problem)
    /// A protocol violation (a bad WebSocket frame, a bad handshake, a stream that does not inflate).
    case protocolError(String)
}

/// The decoder of one leg of a connection (one direction, as read from the producer or as written to the consumer):
/// a state machine fed the leg's bytes in order, whatever the read sizes, that hands back messages and protocol
/// events. It never touches the bytes the relay forwards; it only observes them, in bounded memory.
///
/// `lines`, `length-prefixed`, `websocket` and `grpc` are decoders; the audit drives them all the same way.
public protocol LegDecoder: AnyObject {
    /// Feeds the next bytes of the leg; `output` is called for every message, event and problem, in order.
    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void)
    /// Whether part of a message is waiting for the rest (a close now truncates it).
    var hasPartialMessage: Bool { get }
    /// Forgets a partial message (after it was counted as truncated, or when its producer stopped sending).
    func dropPartial()
}
