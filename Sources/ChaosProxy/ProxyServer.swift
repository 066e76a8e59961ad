public import ChaosCore
public import Logging
public import NIOCore
import NIOPosix
import Synchronization

/// One named TCP proxy: accepts clients on `listen`, dials `upstream` for each on the same event
/// loop, relays both ways through shapers, and applies faults to its live connections.
public final class ProxyServer: Sendable {
    /// The scenario's description of this proxy.
    public let spec: ProxySpec
    /// Running totals.
    public let counters = ProxyCounters()
    private let group: any EventLoopGroup
    private let sink: (any TrafficEventSink)?
    private let clock: RunClock
    private let ids: ConnectionIDSource
    private let seed: SeededGenerator
    private let options: Options
    /// The upstream's address when `spec.upstream` names an IP literal: dialled directly, skipping
    /// NIO's resolver (a getaddrinfo hop to another thread per connection, and Happy Eyeballs).
    private let upstreamAddress: SocketAddress?
    let logger: Logger
    let state = Mutex(State())

    /// Tuning knobs.
    public struct Options: Sendable {
        /// The most bytes a shaper holds per direction before the producer is paused.
        public var maxHeldBytes = 1 << 20
        /// The listen backlog.
        public var backlog: Int32 = 4096
        /// Busy polling for the proxy's event loops (nil: loops sleep between events).
        public var busyPolling: BusyPolling?
        /// Creates default options.
        public init() {}
    }

    struct State {
        var listener: (any Channel)?
        var boundAddress: SocketAddress?
        var refusing = 0
        /// Live connections: what faults can hit.
        var connections: [ConnectionID: ProxiedConnection] = [:]
        /// Connections a fault cut that still have a leg open (half-open, lingering).
        var lingering: [ConnectionID: ProxiedConnection] = [:]
        var conditions: [Int: (DirectionSet, ShapingCondition)] = [:]
        var baseline: LinkProfile?
        var stopped = false
    }

    /// A proxy for `spec`; events go to `sink`, times come from `clock`, connection numbers from `ids`.
    public init(spec: ProxySpec, group: any EventLoopGroup, sink: (any TrafficEventSink)?, clock: RunClock,
                ids: ConnectionIDSource, seed: SeededGenerator, baseline: LinkProfile? = nil,
                options: Options = Options(), logger: Logger = Logger(label: "chaos.proxy")) {
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
    public var boundAddress: SocketAddress? { state.withLock { $0.boundAddress } }

    /// Starts listening. Throws a `network` ``ChaosError`` when the address cannot be bound.
    public func start() async throws {
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(spec.listen.host, port: spec.listen.port)
        } catch {
            throw ChaosError(.badInput, "proxy '\(spec.name)': cannot resolve listen address \(spec.listen)")
        }
        let channel = try await bind(address)
        state.withLock {
            $0.listener = channel
            $0.boundAddress = channel.localAddress
        }
    }

    func rebind(_ address: SocketAddress) async throws -> any Channel { try await bind(address) }

    private func bind(_ address: SocketAddress) async throws -> any Channel {
        do {
            return try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: options.backlog)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { [self] child in
                    child.eventLoop.makeCompletedFuture { self.accept(child) }
                }
                .bind(to: address)
                .get()
        } catch {
            throw ChaosError(.network, "proxy '\(spec.name)': cannot listen on \(spec.listen): \(error)")
        }
    }

    /// Stops listening and resets every live connection.
    public func stop() async {
        let (listener, connections) = state.withLock { state -> ((any Channel)?, [ProxiedConnection]) in
            state.stopped = true
            defer { state.listener = nil }
            return (state.listener, Array(state.connections.values) + Array(state.lingering.values))
        }
        try? await listener?.close()
        for connection in connections {
            try? await connection.eventLoop.submit { connection.terminate() }.get()
        }
    }

    /// The live connections' ids.
    public var liveConnections: [ConnectionID] { state.withLock { Array($0.connections.keys) } }

    // MARK: accepting

    /// Handlers go on both legs at once, before any byte can arrive, so nothing a fast client
    /// sends (data, FIN, RST) before the upstream answers is lost.
    private func addLegHandlers(_ channel: any Channel, side: Side, generator: SeededGenerator) throws {
        let shaper = ShapingHandler(highWater: options.maxHeldBytes, generator: generator.fork(side.rawValue))
        try channel.pipeline.syncOperations.addHandlers([shaper, RelayHandler(side: side, busyPoller: options.busyPolling?.poller(for: channel.eventLoop))])
    }

    private func leg(_ channel: any Channel) throws -> ProxiedConnection.Leg {
        let sync = channel.pipeline.syncOperations
        return ProxiedConnection.Leg(channel: channel, relay: try sync.handler(type: RelayHandler.self),
                                     shaper: try sync.handler(type: ShapingHandler.self))
    }

    private func accept(_ client: any Channel) {
        let id = ids.next()
        let generator = seed.fork("connection", id)
        do {
            try addLegHandlers(client, side: .client, generator: generator)
        } catch {
            client.closeWithReset()
            return
        }
        let upstream = spec.upstream
        let bootstrap = ClientBootstrap(group: client.eventLoop)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { [self] server in
                server.eventLoop.makeCompletedFuture { try self.addLegHandlers(server, side: .server, generator: generator) }
            }
        let connecting = upstreamAddress.map { bootstrap.connect(to: $0) }
            ?? bootstrap.connect(host: upstream.host, port: upstream.port)
        connecting.whenComplete { [self] result in
            switch result {
            case .success(let server): wire(id: id, client: client, server: server)
            case .failure(let error):
                counters.upstreamFailed()
                sink?.record(TrafficEvent(time: clock.now(), connection: 0,
                                          kind: .refused(proxy: spec.name, reason: "upstream \(upstream): \(error)")))
                logger.debug("upstream unreachable", metadata: ["proxy.name": "\(spec.name)", "error": "\(error)"])
                client.closeWithReset()
            }
        }
    }

    private func wire(id: ConnectionID, client: any Channel, server: any Channel) {
        do {
            // Addresses are looked up only when the sink wants them (each lookup is a system call).
            let endpoints = sink?.recordsTraffic != true ? ConnectionEndpoints(proxy: spec.name, client: "", listen: "", proxyLocal: "", server: "")
                : ConnectionEndpoints(
                    proxy: spec.name, client: client.remoteAddress?.hostPort ?? "?", listen: client.localAddress?.hostPort ?? "?",
                    proxyLocal: server.localAddress?.hostPort ?? "?", server: server.remoteAddress?.hostPort ?? "?")
            let connection = ProxiedConnection(
                id: id, endpoints: endpoints, client: try leg(client), server: try leg(server),
                sink: sink, clock: clock, counters: counters,
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
                })
            let (baseline, conditions, stopped) = state.withLock { state in
                if !state.stopped { state.connections[id] = connection }
                return (state.baseline, state.conditions, state.stopped)
            }
            guard !stopped else { throw ChannelError.ioOnClosedChannel }
            connection.start(baseline: baseline, conditions: conditions)
        } catch {
            client.closeWithReset()
            server.closeWithReset()
        }
    }

}

extension SocketAddress {
    /// `host:port` (IPv6 in brackets).
    public var hostPort: String {
        let host = ipAddress ?? "?"
        return host.contains(":") ? "[\(host)]:\(port ?? 0)" : "\(host):\(port ?? 0)"
    }
}

/// Hands out connection numbers, unique across every proxy of a run.
public final class ConnectionIDSource: Sendable {
    private let counter = Atomic<UInt64>(0)
    /// Numbers start at 1 (0 means "run-wide" in events).
    public init() {}
    func next() -> ConnectionID { counter.wrappingAdd(1, ordering: .relaxed).newValue }
}
