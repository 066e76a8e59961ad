import ChaosCore
import NIOCore

/// One leg of a proxied connection: reads bytes from its channel and hands them to its partner
/// leg, reading only while the connection's ``RelayStateMachine`` says so (the partner can take
/// more: its socket is writable and its shaper is not pressured), so a slow reader slows the
/// writer through TCP. It tells the connection when this leg starts or stops taking bytes.
///
/// Both legs live on one event loop; the pair is wired by ``ProxiedConnection``.
final class RelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Which end of the connection this leg faces.
    let side: Side
    var partner: RelayHandler?
    /// Receives what happens on this leg; set before the channel becomes active for reads.
    weak var connection: ProxiedConnection?
    private(set) var context: ChannelHandlerContext?
    private var pendingRead = false
    private var shaperPaused = false
    /// What arrived before the connection was wired (NIO reads a peer's data and FIN as soon as
    /// the FIN is signalled, even with auto-read off): replayed by ``drainEarlyArrivals()``.
    private var early: (buffers: [ByteBuffer], eof: Bool, error: (any Error)?, inactive: Bool) = ([], false, nil, false)

    /// Told when this leg relayed bytes, to keep the loop polling briefly (nil: no busy polling).
    private let busyPoller: LoopBusyPoller?

    init(side: Side, busyPoller: LoopBusyPoller? = nil) {
        self.side = side
        self.busyPoller = busyPoller
    }

    /// Whether bytes may be handed to this leg for writing (its writability and its shaper's pressure).
    var canAccept: Bool { (context?.channel.isWritable ?? false) && !shaperPaused }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard let connection else {
            early.buffers.append(buffer)
            return
        }
        guard connection.didRead(&buffer, from: side) else { return }
        connection.forward(buffer, from: side)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.context?.flush()
        busyPoller?.noteActivity()
        // The leg's own event is a cheap moment to read its acknowledgements, and the last one: NIO
        // reports an EOF here before it closes a socket whose output was already shut.
        connection?.legHadEvent(side)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case ChannelEvent.inputClosed:
            if let connection { connection.didReceiveEOF(from: side) } else { early.eof = true }
        case let pressure as ShapingPressure:
            shaperPaused = pressure == .paused
            connection?.acceptanceChanged(side)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection?.acceptanceChanged(side)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let connection { connection.legFailed(side, error: error) } else { early.error = error }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let connection { connection.legInactive(side) } else { early.inactive = true }
        context.fireChannelInactive()
    }

    /// Reads again if a read was held back (since the channel became active, or while the machine
    /// said no) and the machine now says yes.
    func startReading() {
        guard pendingRead, let context, connection?.mayRead(side) ?? false else { return }
        pendingRead = false
        context.read()
    }

    /// Replays what arrived before the connection was wired, in order.
    func drainEarlyArrivals() {
        guard let connection else { return }
        let arrived = early
        early = ([], false, nil, false)
        for var buffer in arrived.buffers {
            if connection.didRead(&buffer, from: side) { connection.forward(buffer, from: side) }
        }
        if !arrived.buffers.isEmpty { partner?.context?.flush() }
        if arrived.eof { connection.didReceiveEOF(from: side) }
        if let error = arrived.error { connection.legFailed(side, error: error) }
        if arrived.inactive { connection.legInactive(side) }
    }

    // MARK: outbound

    func read(context: ChannelHandlerContext) {
        // Until the connection is wired (its upstream answered), reads wait: auto-read stays on, so
        // starting needs no option change, only ``startReading()``.
        guard connection != nil else {
            pendingRead = true
            return
        }
        if connection?.mayRead(side) ?? false {
            context.read()
        } else {
            pendingRead = true
        }
    }

    // MARK: partner calls

    /// Writes bytes read from the partner leg to this leg (through the shaper).
    func deliver(_ buffer: ByteBuffer) {
        context?.write(wrapOutboundOut(buffer), promise: nil)
    }

    /// Sends FIN on this leg once everything before it has gone.
    func shutdownOutput() {
        context?.flush()  // NIO fails unflushed writes on a half-close
        context?.close(mode: .output, promise: nil)
    }
}

@available(*, unavailable)
extension RelayHandler: Sendable {}
