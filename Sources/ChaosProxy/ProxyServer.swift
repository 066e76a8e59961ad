package import ChaosCore
package import ChaosProtocols
import ChaosTLS
package import Logging
package import NIOCore
import NIOPosix
import Synchronization

/// One named proxy: accepts clients on `listen`, dials `upstream` for each on the same event
/// loop, relays both ways through shapers, and applies faults to its live connections. A `udp://` proxy relays
/// datagrams in flows instead (``DatagramRelay``), on the same fault road.
package final class ProxyServer: Sendable {
    /// The scenario's description of this proxy.
    package let spec: ProxySpec
    /// Running totals.
    package let counters = ProxyCounters()
    let group: any EventLoopGroup
    let sink: (any TrafficEventSink)?
    let clock: RunClock
    let ids: ConnectionIDSource
    let seed: SeededGenerator
    let options: Options
    /// The upstream's address when `spec.upstream` names an IP literal: dialled directly, skipping
    /// NIO's resolver (a getaddrinfo hop to another thread per connection, and Happy Eyeballs).
    let upstreamAddress: SocketAddress?
    let logger: Logger
    let state = Mutex(State())
    /// The radio of the phone behind this proxy (a `radio` fault or profile that is not `per: connection`).
    let radio = RadioClock()

    /// Tuning knobs.
    package struct Options: Sendable {
        /// The most bytes a shaper holds per direction before the producer is paused.
        package var maxHeldBytes = 1 << 20
        /// The listen backlog.
        package var backlog: Int32 = 4096
        /// Busy polling for the proxy's event loops (nil: loops sleep between events).
        package var busyPolling: BusyPolling?
        /// Relay threads for connections that nothing shapes (nil: NIO relays every connection).
        /// With them, the proxy accepts on these threads; a connection goes to NIO when it starts
        /// under a link profile or a shaping fault on all connections, or when one reaches it later.
        package var epollRelay: EpollRelayLoopGroup?
        /// The plug-in whose frames the proxy follows on every connection, so that its faults (`ws-close`,
        /// `goaway`) can reach them (nil: none). Such connections are all relayed by NIO.
        package var frames: (any ProtocolPlugin.Type)?
        /// How long an upstream has to answer before its client is reset (both relays).
        package var connectTimeout = RelayStateMachine.connectTimeout
        /// When the epoll relay splices bytes nothing records (``SplicePolicy``; `CHAOS_SPLICE` by default).
        package var splice = SplicePolicy.fromEnvironment
        /// Where the NSS key log lines of TLS proxies' connections go, both legs (`keys.log`); nil: nowhere.
        package var keyLog: (@Sendable (ByteBuffer) -> Void)?
        /// A UDP flow with no datagram either way for this long ends (nanoseconds; a NAT's usual UDP timeout).
        package var udpIdleTimeout: Int64 = 60_000_000_000
        /// The most UDP flows held at once: datagrams from a new client address past it are dropped (counted).
        package var maxFlows = 10_000
        /// Whether this proxy's dead paths and loss go to the kernel (``KernelDeadPath``) where the process has that path;
        /// false: held and emulated in the proxy, as where it lacks the privilege (a test of the emulation asks for it).
        package var deadPathInKernel = true
        /// Creates default options.
        package init() {}
    }

    struct State {
        var listener: Listener?
        var boundAddress: SocketAddress?
        var refusing = 0
        /// Live connections: what faults can hit.
        var connections: [ConnectionID: ProxiedConnection] = [:]
        /// Live connections relayed outside NIO (none of them shaped or cut).
        var epollRelay: [ConnectionID: EpollRelayConnection] = [:]
        /// Epoll relay connections a fault cut that still have a leg open (half-open, lingering).
        var epollLingering: [ConnectionID: EpollRelayConnection] = [:]
        /// Epoll relay connections on their way to NIO.
        var moving: [ConnectionID: Task<ProxiedConnection?, Never>] = [:]
        /// Connections a fault cut that still have a leg open (half-open, lingering).
        var lingering: [ConnectionID: ProxiedConnection] = [:]
        /// Shaping on every connection, now and new (or each that its draw reaches), by occurrence index.
        var shaping: [ShapingKey: ShapingOnAll] = [:]
        /// Protocol faults that last, lying in wait on every connection whose frames are followed; and how many
        /// connections each caught.
        var waiting: [ShapingKey: ProtocolFault] = [:]
        var caught: [ShapingKey: Int] = [:]
        /// Instant protocol faults whose effect outlived them (each lies in wait under a key of its own).
        var lingeringFaults = 0
        var baseline: LinkProfile?
        var stopped = false
        /// The TLS of a proxy with a `tls:` block, made when it starts.
        var tls: TLSInterceptor?
        /// Handshake faults in force (nested occurrences counted), and the handshakes a stall holds.
        var handshakeFaults = HandshakeFaults()
        /// The local address new upstream connections come from since a handoff with `new_address` (nil: the
        /// system's choice); such connections are NIO's.
        var sourceAddress: SocketAddress?
        /// How many handoffs with `new_address` have happened: the next takes the pool's next address.
        var addressChanges = 0
        /// The relay of a `udp://` proxy, made when it starts.
        var datagram: DatagramRelay?
        /// The move of a UDP proxy's datagrams off the fast path, once begun (``ProxyServer/leaveDatagramFastPath()``).
        var leavingFastPath: Task<Void, Never>?
    }

    /// A proxy for `spec`; events go to `sink`, times come from `clock`, connection numbers from `ids`.
    package init(
        spec: ProxySpec,
        group: any EventLoopGroup,
        sink: (any TrafficEventSink)?,
        clock: RunClock,
        ids: ConnectionIDSource,
        seed: SeededGenerator,
        baseline: LinkProfile? = nil,
        options: Options = Options(),
        logger: Logger = Logger(label: "chaos.proxy")
    ) {
        self.spec = spec
        self.group = group
        self.sink = sink
        self.clock = clock
        self.ids = ids
        self.seed = seed
        self.options = options
        self.upstreamAddress = try? SocketAddress(ipAddress: spec.upstream.host, port: spec.upstream.port)
        self.logger = logger
        state.withLock { $0.baseline = baseline }
    }

    /// The address actually bound (the real port when `listen` said 0).
    package var boundAddress: SocketAddress? { state.withLock { $0.boundAddress } }

    /// Starts listening. Throws a `network` ``ChaosError`` when the address cannot be bound.
    package func start() async throws {
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(spec.listen.host, port: spec.listen.port)
        } catch {
            throw ChaosError(.badInput, "proxy '\(spec.name)': cannot resolve listen address \(spec.listen)")
        }
        if spec.transport == .udp {
            let relay = DatagramRelay(server: self, loop: group.next())
            state.withLock { $0.datagram = relay }
        }
        if let tls = spec.tls {
            let interceptor = try TLSInterceptor(spec: tls, upstreamHost: spec.upstream.host, keyLog: options.keyLog)
            state.withLock { $0.tls = interceptor }
        }
        let listener = try await bind(address)
        state.withLock {
            $0.listener = listener
            $0.boundAddress = listener.address
        }
    }

    func rebind(_ address: SocketAddress) async throws -> Listener { try await bind(address) }

    private func bind(_ address: SocketAddress) async throws -> Listener {
        if let relay = datagramRelay {
            do {
                return try await relay.bind(address)
            } catch {
                throw ChaosError(.network, "proxy '\(spec.name)': cannot listen on \(spec.listenText): \(error)")
            }
        }
        if let loops = options.epollRelay, spec.tls == nil {  // TLS lives in the NIO relay
            do {
                let route = epollRoute
                return .epollRelay(
                    try await EpollRelayListener(
                        address: address,
                        backlog: options.backlog,
                        group: loops,
                        logger: logger
                    ) {
                        [self] client, loop in admit(client, on: loop, route: route)
                    }
                )
            } catch {
                throw ChaosError(.network, "proxy '\(spec.name)': cannot listen on \(spec.listen): \(error)")
            }
        }
        do {
            return .nio(
                try await ServerBootstrap(group: group)
                    .serverChannelOption(ChannelOptions.backlog, value: options.backlog)
                    .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                    .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                    .childChannelInitializer { [self] child in
                        child.eventLoop.makeCompletedFuture {
                            if let tls = state.withLock({ $0.tls }) {
                                self.acceptTLS(child, id: ids.next(), tls: tls)
                            } else {
                                self.accept(child, id: ids.next())
                            }
                        }
                    }
                    .bind(to: address)
                    .get()
            )
        } catch {
            throw ChaosError(.network, "proxy '\(spec.name)': cannot listen on \(spec.listen): \(error)")
        }
    }

    /// Stops listening and resets every live connection.
    package func stop() async {
        let (listener, moving) = state.withLock { state -> (Listener?, [Task<ProxiedConnection?, Never>]) in
            state.stopped = true
            defer { state.listener = nil }
            return (state.listener, Array(state.moving.values))
        }
        await listener?.close()
        for task in moving { _ = await task.value }
        let (connections, epollRelay) = state.withLock { state in
            (
                Array(state.connections.values) + Array(state.lingering.values),
                Array(state.epollRelay.values) + Array(state.epollLingering.values)
            )
        }
        for connection in epollRelay {
            await connection.loop.submit { connection.terminate() }
        }
        if let relay = datagramRelay { try? await relay.loop.submit { relay.stop() }.get() }
        for connection in connections {
            try? await connection.eventLoop.submit { connection.terminate() }.get()
        }
    }

    /// The ids of cut connections still lingering (half-open) on the epoll relay threads.
    var lingeringOnEpollRelay: [ConnectionID] { state.withLock { Array($0.epollLingering.keys) } }

    /// The ids of live connections relayed by epoll relay threads (the rest are NIO's).
    package var epollRelayConnections: [ConnectionID] { state.withLock { Array($0.epollRelay.keys) } }

    /// The live connections' ids.
    package var liveConnections: [ConnectionID] {
        let flows = datagramRelay?.liveIDs.withLock { Array($0) } ?? []
        return state.withLock { Array($0.connections.keys) + Array($0.epollRelay.keys) } + flows
    }

    // MARK: accepting

    /// Leg handlers for a connection numbered `id` (its shapers draw from the connection's seed).
    func addLegHandlers(_ channel: any Channel, side: Side, id: ConnectionID) throws {
        try addLegHandlers(channel, side: side, generator: seed.fork("connection", id))
    }

    /// Handlers go on both legs at once, before any byte can arrive, so nothing a fast client
    /// sends (data, FIN, RST) before the upstream answers is lost.
    func addLegHandlers(_ channel: any Channel, side: Side, generator: SeededGenerator) throws {
        let shaper = ShapingHandler(highWater: options.maxHeldBytes, generator: generator.fork(side.rawValue))
        try channel.pipeline.syncOperations.addHandlers([
            shaper, RelayHandler(side: side, busyPoller: options.busyPolling?.poller(for: channel.eventLoop)),
        ])
    }

    private func leg(_ channel: any Channel) throws -> ProxiedConnection.Leg {
        let sync = channel.pipeline.syncOperations
        return ProxiedConnection.Leg(
            channel: channel,
            relay: try sync.handler(type: RelayHandler.self),
            shaper: try sync.handler(type: ShapingHandler.self)
        )
    }

    func accept(_ client: any Channel, id: ConnectionID) {
        let generator = seed.fork("connection", id)
        do {
            try addLegHandlers(client, side: .client, generator: generator)
        } catch {
            client.closeWithReset()
            return
        }
        let upstream = spec.upstream
        let bootstrap = relayBootstrap(client.eventLoop)
            .connectTimeout(.nanoseconds(options.connectTimeout.nanoseconds))
            .channelInitializer { [self] server in
                server.eventLoop.makeCompletedFuture { try self.addLegHandlers(server, side: .server, generator: generator) }
            }
        let sourced = fromSourceAddress(bootstrap)
        let connecting = upstreamAddress.map { sourced.connect(to: $0) } ?? sourced.connect(host: upstream.host, port: upstream.port)
        connecting.whenComplete { [self] result in
            switch result {
            case .success(let server): _ = wire(id: id, client: client, server: server)
            case .failure(let error): upstreamFailed(client: client, reason: "upstream \(upstream): \(error)")
            }
        }
    }

    /// The same rule as the epoll relay's: no upstream (or none in time, or its TLS failed) resets the client.
    func upstreamFailed(client: any Channel, reason: String) {
        var machine = RelayStateMachine()
        for action in machine.connectFailed() {
            switch action {
            case .recordUpstreamFailure:
                counters.upstreamFailed()
                sink?.record(TrafficEvent(time: clock.now(), connection: 0, kind: .refused(proxy: spec.name, reason: reason)))
                logger.debug("upstream unreachable", metadata: ["proxy.name": "\(spec.name)", "error": "\(reason)"])
            case .reset(.client): client.closeWithReset()
            default: break  // no server channel, nothing wired to forget
            }
        }
    }

    /// Joins both legs into a live connection; `adopted` carries what an epoll relay had
    /// already done for it. Returns nil (both legs reset) when it cannot.
    func wire(
        id: ConnectionID,
        client: any Channel,
        server: any Channel,
        adopted: ProxiedConnection.Adoption? = nil
    ) -> ProxiedConnection? {
        do {
            // Addresses are looked up only when the sink wants them (each lookup is a system call).
            let endpoints =
                sink?.recordsTraffic != true
                ? ConnectionEndpoints(proxy: spec.name, client: "", listen: "", proxyLocal: "", server: "")
                : ConnectionEndpoints(
                    proxy: spec.name,
                    client: client.remoteAddress?.hostPort ?? "?",
                    listen: client.localAddress?.hostPort ?? "?",
                    proxyLocal: server.localAddress?.hostPort ?? "?",
                    server: server.remoteAddress?.hostPort ?? "?"
                )
            let connection = ProxiedConnection(
                id: id,
                endpoints: endpoints,
                client: try leg(client),
                server: try leg(server),
                sink: sink,
                clock: clock,
                counters: counters,
                deadPathInKernel: options.deadPathInKernel,
                onCut: { [weak self] id in
                    self?.state.withLock { state in
                        if let cut = state.connections.removeValue(forKey: id) { state.lingering[id] = cut }
                    }
                },
                onFinished: { [weak self] id in
                    self?.state.withLock { state in
                        state.connections.removeValue(forKey: id)
                        state.lingering.removeValue(forKey: id)
                    }
                }
            )
            let (baseline, shaping, stopped) = state.withLock { state in
                if !state.stopped { state.connections[id] = connection }
                return (state.baseline, state.shaping, state.stopped)
            }
            guard !stopped else { throw ChannelError.ioOnClosedChannel }
            for (side, channel) in [(Side.client, client), (.server, server)] {
                connection.recordMaps[side.slot] = try? channel.pipeline.syncOperations.handler(type: TLSWireMeter.self).map
            }
            if connection.recordMaps.contains(where: { $0 != nil }) { reportTLSFailures(of: connection, client: client) }
            if let plugin = options.frames, adopted == nil {
                connection.protocolFrames = ProtocolFrames(plugin: plugin)
                connection.protocolFrames?.waiting = state.withLock { $0.waiting }
                connection.onCaught = { [weak self] key in self?.state.withLock { $0.caught[key, default: 0] += 1 } }
            }
            // A connection that started on the epoll relay started with no link profile. Its faults are on
            // before any byte passes (a timeout's timer starts with it).
            connection.start(
                baseline: adopted == nil ? baseline : nil,
                shaping: shaping.filter { $0.value.reaches(id) }.mapValues(\.effect),
                adopted: adopted,
                path: ConnectionPath(proxyRadio: radio)
            )
            return connection
        } catch {
            client.closeWithReset()
            server.closeWithReset()
            return nil
        }
    }

}

extension SocketAddress {
    /// `host:port` (IPv6 in brackets).
    package var hostPort: String {
        let host = ipAddress ?? "?"
        return host.contains(":") ? "[\(host)]:\(port ?? 0)" : "\(host):\(port ?? 0)"
    }
}

/// Hands out connection numbers, unique across every proxy of a run.
package final class ConnectionIDSource: Sendable {
    private let counter = Atomic<UInt64>(0)
    /// Numbers start at 1 (0 means "run-wide" in events).
    package init() {}
    func next() -> ConnectionID { counter.wrappingAdd(1, ordering: .relaxed).newValue }
}
