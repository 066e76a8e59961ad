import ChaosCore
import NIOCore

/// One leg of a proxied connection: reads bytes from its channel and hands them to its partner
/// leg, reading only while the partner can take more (its socket is writable and its shaper is
/// not pressured), so a slow reader slows the writer through TCP. A FIN on this leg becomes a
/// half-close on the partner leg, behind any data still held.
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
    /// Set when what this leg reads goes nowhere (its partner was cut by a fault): it is read
    /// regardless of the partner, so that its peer's FIN or RST is still seen.
    var discardsReads = false {
        didSet { if discardsReads { partnerCanAcceptChanged() } }
    }

    init(side: Side) { self.side = side }

    /// Whether bytes may be handed to this leg for writing.
    var canAccept: Bool { (context?.channel.isWritable ?? false) && !shaperPaused }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let connection, connection.didRead(buffer, from: side) else { return }
        partner?.deliver(buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.context?.flush()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case ChannelEvent.inputClosed:
            connection?.didReceiveEOF(from: side)
        case let pressure as ShapingPressure:
            shaperPaused = pressure == .paused
            partner?.partnerCanAcceptChanged()
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        partner?.partnerCanAcceptChanged()
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connection?.legFailed(side, error: error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.legInactive(side)
        context.fireChannelInactive()
    }

    // MARK: outbound

    func read(context: ChannelHandlerContext) {
        if discardsReads || partner?.canAccept ?? false {
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
        context?.flush() // NIO fails unflushed writes on a half-close
        context?.close(mode: .output, promise: nil)
    }

    private func partnerCanAcceptChanged() {
        guard pendingRead, discardsReads || partner?.canAccept ?? false, let context else { return }
        pendingRead = false
        context.read()
    }
}

@available(*, unavailable)
extension RelayHandler: Sendable {}
