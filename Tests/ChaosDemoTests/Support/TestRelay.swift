import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A tiny TCP relay for tests: forwards bytes both ways between each accepted client and `upstream`,
/// and can cut every live connection with RST (`cutAll`) or stop forwarding on them without closing
/// anything (`blackhole`), which is a half-open partition.
///
/// `@unchecked Sendable` is safe: every mutable property is touched only on `loop`; the listener and
/// every relayed channel live on `loop`, and the public methods hop there with `submit`/`flatSubmit`.
final class TestRelay: @unchecked Sendable {
    let loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    private let upstreamPort: Int
    private var listener: (any Channel)?
    private var pairs: [RelayPair] = []
    /// New connections start black-holed too.
    private var blackholeNew = false
    /// Connections accepted so far.
    private(set) var accepted = 0

    init(upstreamPort: Int) {
        self.upstreamPort = upstreamPort
    }

    /// Starts listening on 127.0.0.1 and returns the port.
    func start() async throws -> Int {
        let channel = try await ServerBootstrap(group: loop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture {
                    let pair = RelayPair(inbound: inbound, blackholed: self.blackholeNew)
                    self.pairs.append(pair)
                    self.accepted += 1
                    try inbound.pipeline.syncOperations.addHandler(RelayHandler(pair: pair, fromClient: true))
                    self.connectOutbound(for: pair)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        listener = channel
        return channel.localAddress?.port ?? 0
    }

    private func connectOutbound(for pair: RelayPair) {
        ClientBootstrap(group: loop)
            .channelInitializer { outbound in
                outbound.eventLoop.makeCompletedFuture {
                    try outbound.pipeline.syncOperations.addHandler(RelayHandler(pair: pair, fromClient: false))
                }
            }
            .connect(host: "127.0.0.1", port: upstreamPort)
            .whenComplete { result in
                switch result {
                case .success(let outbound):
                    pair.outbound = outbound
                    for buffer in pair.pending { outbound.writeAndFlush(buffer, promise: nil) }
                    pair.pending.removeAll()
                case .failure:
                    pair.inbound.close(promise: nil)
                }
            }
    }

    /// Resets both sides of every live connection (SO_LINGER 0, then close: an RST each way).
    func cutAll() async throws {
        try await loop.flatSubmit {
            for pair in self.pairs { pair.blackholed = true }  // no orderly close may overtake the resets
            let channels = self.pairs.flatMap { [$0.inbound, $0.outbound].compactMap { $0 } }
            self.pairs.removeAll()
            let lingers = channels.map { channel -> EventLoopFuture<Void> in
                let provider = channel as? any SocketOptionProvider
                return (provider?.setSoLinger(linger(l_onoff: 1, l_linger: 0)) ?? channel.eventLoop.makeSucceededVoidFuture())
                    .recover { _ in }
            }
            return EventLoopFuture.andAllComplete(lingers, on: self.loop).flatMap {
                EventLoopFuture.andAllComplete(channels.map { $0.close().recover { _ in } }, on: self.loop)
            }
        }.get()
    }

    /// Stops forwarding on every live connection, leaving the sockets open (half-open partition);
    /// with `newConnections`, connections accepted from now on are black-holed as well.
    func blackhole(newConnections: Bool = false) async throws {
        try await loop.submit {
            for pair in self.pairs { pair.blackholed = true }
            self.blackholeNew = newConnections
        }.get()
    }

    /// Forwards again on new connections (existing black-holed ones stay silent).
    func heal() async throws {
        try await loop.submit { self.blackholeNew = false }.get()
    }

    /// Connections accepted so far.
    func acceptedCount() async throws -> Int {
        try await loop.submit { self.accepted }.get()
    }

    /// Closes the listener and every connection.
    func stop() async {
        try? await loop.flatSubmit {
            let channels = [self.listener].compactMap { $0 } + self.pairs.flatMap { [$0.inbound, $0.outbound].compactMap { $0 } }
            self.pairs.removeAll()
            return EventLoopFuture.andAllComplete(channels.map { $0.close().recover { _ in } }, on: self.loop)
        }.get()
    }
}

/// One relayed connection. `@unchecked Sendable`: only touched on the relay's loop (see ``TestRelay``).
final class RelayPair: @unchecked Sendable {
    let inbound: any Channel
    var outbound: (any Channel)?
    var blackholed: Bool
    var pending: [ByteBuffer] = []

    init(inbound: any Channel, blackholed: Bool) {
        self.inbound = inbound
        self.blackholed = blackholed
    }
}

/// Forwards what one side reads to the other side, unless the pair is black-holed.
final class RelayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let pair: RelayPair
    private let fromClient: Bool

    init(pair: RelayPair, fromClient: Bool) {
        self.pair = pair
        self.fromClient = fromClient
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !pair.blackholed else { return }
        let buffer = unwrapInboundIn(data)
        if fromClient {
            if let outbound = pair.outbound {
                outbound.writeAndFlush(buffer, promise: nil)
            } else {
                pair.pending.append(buffer)
            }
        } else {
            pair.inbound.writeAndFlush(buffer, promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // An orderly end on one side ends the other, unless the pair is black-holed (then nothing passes).
        guard !pair.blackholed else { return }
        if fromClient { pair.outbound?.close(promise: nil) } else { pair.inbound.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
