import ChaosCore
import Glibc
public import NIOCore
public import NIOEmbedded

@testable import ChaosProxy

/// The NIO relay (``ProxiedConnection``) with both legs on EmbeddedChannels of one virtual-time
/// loop, each leg's far end played by a ``WireEnd``: what a conformance history does to a
/// connection, without sockets.
final class EmbeddedRelay {
    let loop = EmbeddedEventLoop()
    let channels: [EmbeddedChannel]
    let ends: [WireEnd]
    let events = EventRecorder()
    let connection: ProxiedConnection

    /// `highWater`: what each leg's shaper holds before it pauses its producer.
    init(highWater: Int = 1 << 20) throws {
        var channels: [EmbeddedChannel] = []
        var ends: [WireEnd] = []
        var legs: [ProxiedConnection.Leg] = []
        for side in Side.allCases {
            let channel = EmbeddedChannel(loop: loop)
            let end = WireEnd()
            let shaper = ShapingHandler(highWater: highWater, generator: SeededGenerator(seed: 1))
            let relay = RelayHandler(side: side)
            try channel.pipeline.syncOperations.addHandlers([end, shaper, relay])
            try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
            channels.append(channel)
            ends.append(end)
            legs.append(ProxiedConnection.Leg(channel: channel, relay: relay, shaper: shaper))
        }
        self.channels = channels
        self.ends = ends
        connection = ProxiedConnection(
            id: 1,
            endpoints: ConnectionEndpoints(proxy: "embedded", client: "", listen: "", proxyLocal: "", server: ""),
            client: legs[0],
            server: legs[1],
            sink: events,
            clock: RunClock(),
            counters: ProxyCounters(),
            deadPathInKernel: false,
            onCut: { _ in },
            onFinished: { _ in }
        )
        connection.start(baseline: nil, shaping: [:])
        settle()
    }

    /// Plays `step` and lets virtual time run past any acknowledgement wait (never as far as a linger).
    func play(_ step: WireStep) {
        switch step {
        case .clientSends, .serverSends:
            let side = step.actor!
            if channels[side.slot].isActive { _ = try? channels[side.slot].writeInbound(ByteBuffer(bytes: WireStep.payload(from: side))) }
        case .clientFIN, .serverFIN:
            ends[step.actor!.slot].peerSentFIN()
        case .clientReset, .serverReset:
            ends[step.actor!.slot].peerReset()
        case .terminate:
            connection.terminate()
        default:
            _ = connection.cut(step.cutMode!, linger: .seconds(Int64(30)))
        }
        settle()
    }

    private func settle() {
        loop.run()
        loop.advanceTime(by: .nanoseconds(RelayStateMachine.acknowledgementWait.nanoseconds + 100_000_000))
    }

    /// What each peer sees now, and what the proxy recorded of each leg.
    var views: [PeerView] {
        Side.allCases.map { side in
            var view = PeerView(received: ends[side.slot].received, end: ends[side.slot].end)
            view.recorded = events.closes(side).last
            return view
        }
    }

    func finish() {
        for channel in channels where channel.isActive { _ = try? channel.finish(acceptAlreadyClosed: true) }
    }
}

/// The far end of one leg, at the head of an EmbeddedChannel's pipeline: it takes what the relay
/// writes and how it closes (a FIN, a close, a close with SO_LINGER 0: a reset) as its peer would
/// see them, and plays the peer's FIN and reset. Like NIO's socket channels it closes a channel
/// whose output is shut once its input is too (and the other way round).
final class WireEnd: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer

    private(set) var received: [UInt8] = []
    private(set) var end = PeerView.End.open
    /// How many reads the relay asked of this leg's socket.
    private(set) var reads = 0
    private var context: ChannelHandlerContext?
    private var inputClosed = false
    private var outputClosed = false
    /// SO_LINGER 0 was set: the close is a reset.
    var resets = false

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        received += unwrapOutboundIn(data).readableBytesView
        promise?.succeed()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .output, !inputClosed {
            outputClosed = true
            if end == .open { end = .fin }
            promise?.succeed()
            return
        }
        if end != .gone { end = resets ? .reset : end == .open ? .fin : end }
        context.close(mode: .all, promise: promise)
    }

    /// The peer sends FIN: the relay sees the input close, or (our FIN went already) the channel close.
    func peerSentFIN() {
        guard let context, context.channel.isActive else { return }
        inputClosed = true
        if outputClosed {
            context.close(mode: .all, promise: nil)
        } else {
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
    }

    /// The peer resets the connection: the relay sees the error, then the channel close.
    func peerReset() {
        guard let context, context.channel.isActive else { return }
        end = .gone
        context.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read(descriptor:pointer:size:)"))
        if context.channel.isActive { context.close(mode: .all, promise: nil) }
    }
}

/// EmbeddedChannel as a socket option provider, so that the relay's ``Channel/closeWithReset()``
/// marks its ``WireEnd``'s close as a reset (every other option is refused, as a socket without
/// TCP would: no acknowledgements are read).
extension EmbeddedChannel: @retroactive SocketOptionProvider {
    public func unsafeSetSocketOption<Value: Sendable>(level: SocketOptionLevel, name: SocketOptionName, value: Value) -> EventLoopFuture<Void> {
        guard level == SOL_SOCKET, name == SO_LINGER, let end = try? pipeline.syncOperations.handler(type: WireEnd.self) else {
            return eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        end.resets = true
        return eventLoop.makeSucceededVoidFuture()
    }

    public func unsafeSetSocketOption<Value: Sendable>(
        level: NIOBSDSocket.OptionLevel,
        name: NIOBSDSocket.Option,
        value: Value
    ) -> EventLoopFuture<Void> {
        unsafeSetSocketOption(level: SocketOptionLevel(level.rawValue), name: SocketOptionName(name.rawValue), value: value)
    }

    public func unsafeGetSocketOption<Value: Sendable>(level: SocketOptionLevel, name: SocketOptionName) -> EventLoopFuture<Value> {
        eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
    }

    public func unsafeGetSocketOption<Value: Sendable>(level: NIOBSDSocket.OptionLevel, name: NIOBSDSocket.Option) -> EventLoopFuture<Value> {
        eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
    }
}
