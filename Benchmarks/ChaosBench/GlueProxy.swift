import NIOCore
import NIOPosix

/// `glue-proxy --port P --upstream-port U [--threads N]`: the least a SwiftNIO TCP proxy can do
/// (NIO's GlueHandler shape: two channels on one loop, each writing what the other reads, reads
/// gated by the partner's writability, half-close passed on), with no shaping, no faults and no
/// events. The benchmark measures it as the floor of a NIO proxy: what chaos costs beyond it is
/// chaos's own. Runs until killed.
enum GlueProxy {
    static func run(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let upstreamPort = try arguments.integer("upstream-port", default: 0)
        guard (1...65535).contains(upstreamPort) else { throw BenchError("--upstream-port must be 1...65535") }
        let upstream = try SocketAddress(ipAddress: "127.0.0.1", port: upstreamPort)
        let channel = try EchoServer.listener(arguments)
            // The accepted channel is registered (and starts reading) only once this future completes.
            .childChannelInitializer { client in
                ClientBootstrap(group: client.eventLoop)
                    .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                    .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                    .connect(to: upstream)
                    .flatMapThrowing { server in
                        let (toServer, toClient) = GlueHandler.pair()
                        try client.pipeline.syncOperations.addHandler(toServer)
                        try server.pipeline.syncOperations.addHandler(toClient)
                    }
            }
            .bind(host: "127.0.0.1", port: Int(port))
            .wait()
        print("glue-proxy listening on \(channel.localAddress.map { "\($0)" } ?? "?") -> \(upstream)")
        try channel.closeFuture.wait()
    }
}

/// One side of a glued pair: what its channel reads is written to the partner's channel.
final class GlueHandler: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    static func pair() -> (GlueHandler, GlueHandler) {
        let first = GlueHandler()
        let second = GlueHandler()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { partner?.context?.write(data, promise: nil) }
    func channelReadComplete(context: ChannelHandlerContext) { partner?.context?.flush() }
    func channelInactive(context: ChannelHandlerContext) { partner?.context?.close(promise: nil) }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event { partner?.shutdownOutputAfterWrites() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { partner?.partnerBecameWritable() }
    }

    func read(context: ChannelHandlerContext) {
        if partner?.context?.channel.isWritable ?? false { context.read() } else { pendingRead = true }
    }

    /// Half-closes once every queued write has gone: NIO turns an output close on a channel whose
    /// input is already closed into a full close, which would fail the writes still queued.
    private func shutdownOutputAfterWrites() {
        guard let context else { return }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(ByteBuffer()), promise: written)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in bound.value.close(mode: .output, promise: nil) }
    }

    private func partnerBecameWritable() {
        guard pendingRead, let context else { return }
        pendingRead = false
        context.read()
    }
}

@available(*, unavailable)
extension GlueHandler: Sendable {}
