import ChaosTLS
import NIOCore
import NIOTLS

/// The first handler of a TLS proxy's client leg until the client's ClientHello is in: it reads (the relay does not
/// yet), keeps every byte, and tells the proxy the SNI and ALPN offer, so that the upstream can be dialled with the
/// same before the client is answered. Removed once the client's TLS handler is in place; the bytes it kept go to it.
final class ClientHelloReader: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var kept: [UInt8] = []
    private var told = false
    private let onHello: (Result<ClientHello, ClientHelloError>) -> Void
    private var context: ChannelHandlerContext?
    /// Set while a handshake fault holds the client: told when the client leaves.
    private var onGone: (() -> Void)?

    /// Why no ClientHello came.
    struct ClientHelloError: Error, CustomStringConvertible {
        let description: String
    }

    init(onHello: @escaping (Result<ClientHello, ClientHelloError>) -> Void) { self.onHello = onHello }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { context.read() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        onGone = nil
    }

    /// While a handshake fault stalls the client: reads on (what comes is kept for the TLS handler), so that a client
    /// that gives up is noticed and `gone` called (once).
    func hold(gone: @escaping () -> Void) {
        onGone = gone
        context?.read()
    }

    /// Ends the hold: nothing more is read until the client's TLS handler asks.
    func release() { onGone = nil }

    /// Answers the ClientHello with a fatal `handshake_failure` alert (a TLS record, written below every other
    /// handler) and closes the connection.
    func refuse() {
        guard let context else { return }
        onGone = nil
        let alert: [UInt8] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]  // alert record: fatal (2), handshake_failure (40)
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: alert))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func departed() {
        guard let gone = onGone else { return }
        onGone = nil
        gone()
    }

    func channelActive(context: ChannelHandlerContext) {
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        kept += unwrapInboundIn(data).readableBytesView
        guard !told else { return }
        switch ClientHello.parse(kept) {
        case .hello(let hello, _): tell(.success(hello))
        case .incomplete:
            if kept.count > ClientHello.largest + 4 * 2_048 { tell(.failure(.init(description: "no ClientHello in \(kept.count) bytes"))) }
        case .notTLS(let reason): tell(.failure(.init(description: "the client does not speak TLS: \(reason)")))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !told || onGone != nil { context.read() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            if !told { tell(.failure(.init(description: "the client closed before its ClientHello"))) } else { departed() }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !told { tell(.failure(.init(description: "the client's connection failed before its ClientHello: \(error)"))) } else { departed() }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !told { tell(.failure(.init(description: "the client left before its ClientHello"))) } else { departed() }
        context.fireChannelInactive()
    }

    /// On removal, what was kept goes to the next handler (the client's TLS handler), then reads resume as it asks.
    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        if !kept.isEmpty {
            context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: kept)))
            context.fireChannelReadComplete()
            kept = []
        }
        context.leavePipeline(removalToken: removalToken)
    }

    private func tell(_ result: Result<ClientHello, ClientHelloError>) {
        told = true
        onHello(result)
    }
}

/// Reads a leg until its TLS handshake is over (the relay reads only once the connection is wired), and tells when
/// it is: its negotiated ALPN protocol, or why it failed (once).
final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    let done: EventLoopPromise<String?>
    private var finished = false

    init(done: EventLoopPromise<String?>) { self.done = done }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.read() }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.read()
        context.fireChannelActive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !finished { context.read() }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event, !finished {
            finished = true
            done.succeed(negotiated)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    /// Fails the handshake unless it is over (a later error is the relay's).
    func fail(_ error: any Error) {
        guard !finished else { return }
        finished = true
        done.fail(error)
    }
}
