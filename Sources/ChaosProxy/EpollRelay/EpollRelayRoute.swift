import ChaosCore
import Logging
import NIOCore

/// What the epoll relay connections of one proxy share: where they dial, where their events
/// and totals go, and whom to tell when one is gone.
struct EpollRelayRoute: Sendable {
    let proxyName: String
    let upstream: SocketAddress
    let sink: (any TrafficEventSink)?
    let clock: RunClock
    let counters: ProxyCounters
    /// How long the upstream has to answer.
    let connectTimeout: ChaosDuration
    let logger: Logger
    /// Called once a connection has ended (not when it was handed over to NIO).
    let finished: @Sendable (ConnectionID) -> Void
    /// Called when a fault cut a connection (it may linger half-open before it ends).
    let cut: @Sendable (ConnectionID) -> Void
    /// The sink, when it wants byte events (asked once, not per read).
    let trafficSink: (any TrafficEventSink)?
    /// When connections splice their bytes (never when ``trafficSink`` wants them).
    let splice: SplicePolicy

    init(
        proxyName: String,
        upstream: SocketAddress,
        sink: (any TrafficEventSink)?,
        clock: RunClock,
        counters: ProxyCounters,
        connectTimeout: ChaosDuration,
        logger: Logger,
        splice: SplicePolicy = .bulk,
        finished: @escaping @Sendable (ConnectionID) -> Void,
        cut: @escaping @Sendable (ConnectionID) -> Void
    ) {
        self.proxyName = proxyName
        self.upstream = upstream
        self.sink = sink
        self.clock = clock
        self.counters = counters
        self.connectTimeout = connectTimeout
        self.logger = logger
        self.finished = finished
        self.cut = cut
        trafficSink = sink?.recordsTraffic == true ? sink : nil
        self.splice = trafficSink == nil ? splice : .off
    }
}

/// A connection taken out of its epollRelay loop, for NIO to carry on: both sockets (still
/// open, out of epoll) and what the relay had done (pending bytes, recorded closes).
struct DetachedConnection: Sendable {
    let client: Int32
    let server: Int32
    let adoption: ProxiedConnection.Adoption
}
