import ChaosCore
import Logging
import NIOCore

/// What the passthrough connections of one proxy share: where they dial, where their events
/// and totals go, and whom to tell when one is gone.
struct PassthroughRoute: Sendable {
    let proxyName: String
    let upstream: SocketAddress
    let sink: (any TrafficEventSink)?
    let clock: RunClock
    let counters: ProxyCounters
    let connectTimeoutNanoseconds: UInt64
    let logger: Logger
    /// Called once a connection has ended (not when it was handed over to NIO).
    let finished: @Sendable (ConnectionID) -> Void
    /// The sink, when it wants byte events.
    var trafficSink: (any TrafficEventSink)? { sink?.recordsTraffic == true ? sink : nil }
}

/// A connection taken out of its passthrough loop, for NIO to carry on: both sockets (still
/// open, out of epoll) and the bytes read from one leg but not yet written to the other.
struct DetachedConnection: Sendable {
    let id: ConnectionID
    let client: Int32
    let server: Int32
    /// Read from the server, still to be written to the client.
    let toClient: [UInt8]
    /// Read from the client, still to be written to the server.
    let toServer: [UInt8]
    /// The legs whose `closed` event was already recorded.
    let closeRecorded: Set<Side>
}
