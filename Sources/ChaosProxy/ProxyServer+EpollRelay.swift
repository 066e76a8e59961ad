import ChaosCore
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization

extension ProxyServer {
    /// Where the proxy listens: a NIO server channel, or a socket its epoll relay threads accept on.
    enum Listener: Sendable {
        case nio(any Channel)
        case epollRelay(EpollRelayListener)
        /// A UDP proxy's socket while its datagrams take the fast path (closing it ends the fast path's flows).
        case datagramFastPath(DatagramFastPath)

        var address: SocketAddress? {
            switch self {
            case .nio(let channel): channel.localAddress
            case .epollRelay(let listener): listener.address
            case .datagramFastPath(let fast): fast.address
            }
        }

        func close() async {
            switch self {
            case .nio(let channel): try? await channel.close()
            case .epollRelay(let listener): await listener.close()
            case .datagramFastPath(let fast): await fast.stop()
            }
        }
    }

    /// A bootstrap for a relay leg: half-closure allowed (a FIN is passed on, not a close), no Nagle.
    func relayBootstrap(_ group: any EventLoopGroup) -> ClientBootstrap {
        ClientBootstrap(group: group)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
    }

    // MARK: accepting on an epoll relay thread

    /// A client accepted on `loop`: relayed there along `route` when nothing shapes new
    /// connections, else handed to NIO.
    func admit(_ client: Int32, on loop: EpollRelayLoop, route: EpollRelayRoute?) {
        let id = ids.next()
        guard let route, options.frames == nil else { return handOver(client, id: id) }
        let connection = EpollRelayConnection(id: id, client: client, loop: loop, route: route)
        let relayed = state.withLock { state in
            guard !state.stopped, state.baseline == nil, state.shaping.isEmpty, state.sourceAddress == nil else { return false }
            state.epollRelay[id] = connection
            return true
        }
        if relayed { connection.start() } else { handOver(client, id: id) }
    }

    /// What epoll relay connections of this proxy share (nil when the upstream is a host name,
    /// which NIO resolves per connection).
    var epollRoute: EpollRelayRoute? {
        guard let upstream = upstreamAddress else { return nil }
        return EpollRelayRoute(
            proxyName: spec.name,
            upstream: upstream,
            sink: sink,
            clock: clock,
            counters: counters,
            connectTimeout: options.connectTimeout,
            logger: logger,
            splice: options.splice,
            finished: { [weak self] id in
                self?.state.withLock { state in
                    state.epollRelay.removeValue(forKey: id)
                    state.epollLingering.removeValue(forKey: id)
                }
            },
            cut: { [weak self] id in
                self?.state.withLock { state in
                    if let cut = state.epollRelay.removeValue(forKey: id) { state.epollLingering[id] = cut }
                }
            }
        )
    }

    /// Gives an accepted client socket to NIO, which then dials the upstream as for any connection.
    private func handOver(_ client: Int32, id: ConnectionID) {
        let identity = RawSocket.identity(client)
        relayBootstrap(group)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture { accept(channel, id: id) }
            }
            .withConnectedSocket(client)
            .whenFailure { [self] error in
                logger.warning("cannot hand a client to NIO", metadata: ["proxy.name": "\(spec.name)", "error": "\(error)"])
                // NIO closes it when it failed after taking it, not when it could not take it.
                RawSocket.closeWithReset(client, ifStill: identity)
            }
    }

    // MARK: moving a connection to NIO

    /// The connections `ids` names (all when nil), after running `body` on the state. Those still on
    /// the epoll relay are moved to NIO first, so that shaping can act on them, unless `inPlace`
    /// (a cut needs no shaping): then they come back apart.
    func targetConnections(
        _ ids: [ConnectionID]?,
        inPlace: Bool = false,
        _ body: (inout State) -> Void
    ) async -> (nio: [ProxiedConnection], epoll: [EpollRelayConnection]) {
        let (ready, moving, relayed) = state.withLock { state in
            body(&state)
            let wanted = ids ?? (Array(state.connections.keys) + Array(state.epollRelay.keys) + Array(state.moving.keys))
            var ready: [ProxiedConnection] = []
            var moving: [Task<ProxiedConnection?, Never>] = []
            var relayed: [EpollRelayConnection] = []
            for id in Set(wanted).sorted() {
                if let connection = state.connections[id] {
                    ready.append(connection)
                } else if let task = state.moving[id] {
                    moving.append(task)
                } else if inPlace, let connection = state.epollRelay[id] {
                    relayed.append(connection)
                } else if let connection = state.epollRelay.removeValue(forKey: id) {
                    let task = Task { await self.move(connection) }
                    state.moving[id] = task
                    moving.append(task)
                }
            }
            return (ready, moving, relayed)
        }
        var connections = ready
        for task in moving {
            if let connection = await task.value { connections.append(connection) }
        }
        return (connections.sorted { $0.id < $1.id }, relayed)
    }

    /// Takes `connection` off its epoll relay thread and carries it on in NIO, pending bytes first.
    private func move(_ connection: EpollRelayConnection) async -> ProxiedConnection? {
        let id = connection.id
        defer { state.withLock { _ = $0.moving.removeValue(forKey: id) } }
        let detached = await withCheckedContinuation { continuation in
            let taken = connection.loop.execute { connection.detach { continuation.resume(returning: $0) } }
            if !taken { continuation.resume(returning: nil) }  // the loop stopped: it reset the connection
        }
        guard let detached else { return nil }
        let loop = group.next()
        let identities = (RawSocket.identity(detached.client), RawSocket.identity(detached.server))
        func leg(_ fd: Int32, _ side: Side) -> EventLoopFuture<any Channel> {
            relayBootstrap(loop)
                .channelInitializer { [self] channel in
                    channel.eventLoop.makeCompletedFuture { try addLegHandlers(channel, side: side, id: id) }
                }
                .withConnectedSocket(fd)
        }
        let client = leg(detached.client, .client)
        let server = leg(detached.server, .server)
        do {
            let (clientChannel, serverChannel) = try await (client.get(), server.get())
            return try await loop.submit {
                self.wire(id: id, client: clientChannel, server: serverChannel, adopted: detached.adoption)
            }.get()
        } catch {
            logger.warning("cannot move a connection to NIO", metadata: ["proxy.name": "\(spec.name)", "error": "\(error)"])
            // A leg NIO took is closed through its channel; one it refused is still ours to close.
            for (leg, fd, identity) in [(client, detached.client, identities.0), (server, detached.server, identities.1)] {
                leg.whenComplete { result in
                    switch result {
                    case .success(let channel): channel.closeWithReset()
                    case .failure: RawSocket.closeWithReset(fd, ifStill: identity)
                    }
                }
            }
            return nil
        }
    }
}
