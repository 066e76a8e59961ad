import NIOCore

/// What a ``WireHandler`` reports to the engine that owns the connection. Every call happens on the
/// connection's event loop, which is the engine's loop.
protocol WireConnectionDelegate: AnyObject {
    func connectionActive(_ channel: any Channel)
    func received(_ message: WireMessage, on channel: any Channel)
    func readComplete(on channel: any Channel)
    func connectionIdle(_ channel: any Channel)
    func connectionInactive(_ channel: any Channel, error: (any Error)?)
}

/// Decodes each line into a ``WireMessage`` and hands it to the delegate; remembers the error that
/// ended the connection so the delegate can tell a reset from an orderly close.
final class WireHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer

    private let delegate: any WireConnectionDelegate
    private var firstError: (any Error)?

    init(delegate: any WireConnectionDelegate) {
        self.delegate = delegate
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Added to a live connection (after a WebSocket upgrade): the connection starts now.
        if context.channel.isActive { delegate.connectionActive(context.channel) }
    }

    func channelActive(context: ChannelHandlerContext) {
        delegate.connectionActive(context.channel)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let line = unwrapInboundIn(data)
        guard let message = WireMessage(line: line.readableBytesView) else { return }  // not ours: ignore
        delegate.received(message, on: context.channel)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        delegate.readComplete(on: context.channel)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            delegate.connectionIdle(context.channel)
        } else if let half = event as? ChannelEvent, half == .inputClosed {
            context.close(promise: nil)  // the peer sent FIN: the stream is over for us too
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if firstError == nil { firstError = error }
        context.close(promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // A write into a reset connection fails only its promise (no errorCaught): watch for it, so that
        // a reset noticed while writing is still told apart from an orderly close.
        let promise = promise ?? context.eventLoop.makePromise()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        promise.futureResult.whenFailure { error in
            if error is IOError, loopBound.value.firstError == nil { loopBound.value.firstError = error }
        }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        delegate.connectionInactive(context.channel, error: firstError)
        context.fireChannelInactive()
    }
}

extension Channel {
    /// Writes one protocol line; flushes unless `flush` is false. Must run on the channel's loop.
    func send(_ message: WireMessage, flush: Bool = true) {
        let buffer = allocator.buffer(bytes: message.encodedLine())
        write(buffer, promise: nil)
        if flush { self.flush() }
    }
}
