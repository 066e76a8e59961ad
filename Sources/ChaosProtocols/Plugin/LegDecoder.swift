package import ChaosCore

/// What a leg decoder found in the bytes fed to it.
package enum DecoderOutput {
    /// A complete message: its body (valid only during the call) and the position in the input just past the
    /// last byte of its last frame, where the message ends on the wire. `binary`: a WebSocket binary message.
    /// `stream`: the message's stream where the framing names it (MQTT's topic, when the scenario's stream is the
    /// topic), read from no field of the body; valid during the call, as the body is.
    case message(UnsafeBufferPointer<UInt8>, end: Int, binary: Bool, stream: UnsafeBufferPointer<UInt8>? = nil)
    /// A complete message of an RPC's `call` (which names its RPC, metadata and stream), as for `message`.
    case callMessage(UnsafeBufferPointer<UInt8>, end: Int, call: RPCCall)
    /// The leg's sender ended `call` (a server's trailers, either side's reset): it reads nothing more of the call, and
    /// what its stack had taken of the other direction and its application had not read is dropped (a server whose
    /// handler returns, or is cancelled when another call takes its stream over, with requests still unread).
    case callEnded(RPCCall, at: Int)
    /// A protocol event (a close frame, a ping, the upgrade handshake…) at `at`, a position in the input.
    case event(ProtocolEvent, at: Int)
    /// The bytes do not fit the protocol: the decoder stops there and ignores the rest of the leg.
    case problem(DecoderProblem, at: Int)
}

/// Something a protocol says about a connection that is not a message.
package enum ProtocolEvent: Equatable {
    /// The request that opened the connection's stream (a WebSocket upgrade, an SSE request) was read: its target
    /// and headers are in the connection's session, for `stream: header:NAME` / `query:NAME`.
    case requestRead
    /// The leg's producer began to end its session (a WebSocket close frame, an MQTT DISCONNECT): its application
    /// reads nothing more, so what its TCP takes from now on is delivered only if its own acks vouch for it later,
    /// as after a TLS close_notify.
    case closing
    /// A receiver (``ProtocolSession/receiver``) gets messages from now on (an MQTT SUBACK: the broker has its
    /// subscription): its copy of a stream is owed what the stream's producer delivers after this, not before.
    case subscribed
    /// The messages this leg hands over from now on are promised `contract` (MQTT: their PUBLISH's QoS; said when it
    /// changes); each stream is judged by the weakest promise its messages carried.
    case contract(DeliveryContract)
    /// The next message this leg hands over is stored state sent again (MQTT: a retained PUBLISH the broker sends on a
    /// new subscription): a copy of a seq its consumer already had counts as `retained`, not as duplicated or
    /// redelivered.
    case retained
    /// The producer says it holds the other direction's stream up to this seq, and resumes after it (Socket.IO: its
    /// CONNECT's `offset`). A seq above it that an earlier connection delivered was never its application's: unless it
    /// is delivered again from now on, it is lost, not ok (a resend of one its application did have stays a
    /// redelivery: a stale resume point).
    case resumePoint(Int64)
    /// One of the plug-in's named counters (``ProtocolPlugin/counters``: `upgrades`, `pings`, `calls`) goes up by one.
    case counted(String)
    /// One of the plug-in's families (``ProtocolPlugin/counterFamilies``: `closeCodes`, `goaways`) counts `code`,
    /// in total and under the fault on at the time. `proxyMayWrite`: the proxy writes frames of this family itself
    /// (a `goaway` fault), so a copy written to the consumer that no read copy matches is the proxy's and counts too.
    case coded(String, code: String, proxyMayWrite: Bool = false)
    /// A keepalive (`ack` false) or its answer, matched by its `opaque` bytes for the round trip (HTTP/2 PING);
    /// counted as `pings` / `pongs`.
    case keepalive(ack: Bool, opaque: UInt64)
    /// A message larger than the decoder's cap: counted, not buffered. `end` as for a message.
    case oversized(bytes: Int, end: Int)
    /// A message that cannot be read (compressed in an encoding the audit does not inflate, or not inflating).
    case unreadable(reason: String)
}

/// Why a leg's bytes do not fit the declared protocol.
package enum DecoderProblem: Equatable {
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
package protocol LegDecoder: AnyObject {
    /// Feeds the next bytes of the leg; `output` is called for every message, event and problem, in order.
    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void)
    /// Whether part of a message is waiting for the rest (a close now truncates it).
    var hasPartialMessage: Bool { get }
    /// Forgets a partial message (after it was counted as truncated, or when its producer stopped sending).
    func dropPartial()
    /// Whether another decoder of the same kind that decoded the same bytes could take this one's state whole
    /// (``adoptState(of:)``) and stand in for it from here: the two copies of a leg may then be decoded once
    /// (false unless the decoder says so; a splitter says so between two messages with nothing buffered).
    var canHandOverState: Bool { get }
    /// Takes `other`'s state as its own (`other` decoded the same bytes this one skipped); false when it cannot.
    func adoptState(of other: any LegDecoder) -> Bool
    /// Whether the connection carries work its protocol says is unfinished: a gRPC call neither side ended (no
    /// trailers, no RST_STREAM). An end that closes its leg then, even with a FIN, abandons what it took for that work:
    /// its HTTP/2 stack read the bytes and its application may never get them (false unless the decoder says so).
    var leavesWorkOpen: Bool { get }
}

extension LegDecoder {
    package var canHandOverState: Bool { false }
    package func adoptState(of other: any LegDecoder) -> Bool { false }
    package var leavesWorkOpen: Bool { false }
}
