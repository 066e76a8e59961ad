package import ChaosCore
package import Foundation
package import Logging

/// Settings of the reference server (`chaos demo server`).
package struct DemoServerConfiguration: Sendable {
    /// Where to listen; port 0 picks a free port (see ``DemoServer/start()``).
    package var listen: DemoAddress
    /// Downstream data messages per second on each attached stream (0: none).
    package var rate: Double
    /// JSONL file of processed upstream messages and events; nil for none.
    package var logPath: String?
    /// Heartbeat interval the clients use; the server's idle timeout derives from it.
    package var heartbeatInterval: ChaosDuration
    /// Heartbeat timeout the clients use.
    package var heartbeatTimeout: ChaosDuration
    /// A connection with no inbound bytes for this long is closed (half-open legs); nil: 3 × interval + timeout.
    package var idleTimeout: ChaosDuration?
    /// Most unacknowledged downstream messages kept per stream before the oldest become a gap.
    package var queueCapacity: Int
    /// TCP (NDJSON lines) or WebSocket (one text message per line); set it after `init`.
    package var transport: DemoTransport = .tcp
    /// TLS with the server's own certificate; nil: cleartext. Set it after `init`.
    package var tls: DemoServerTLS?
    /// Where diagnostics go.
    package var logger: Logger

    /// A configuration with the PRODUCT §6 defaults: 20 msg/s, heartbeat 1 s / 3 s, queue 1000.
    package init(
        listen: DemoAddress,
        rate: Double = 20,
        logPath: String? = nil,
        heartbeatInterval: ChaosDuration = .seconds(Int64(1)),
        heartbeatTimeout: ChaosDuration = .seconds(Int64(3)),
        idleTimeout: ChaosDuration? = nil,
        queueCapacity: Int = 1000,
        logger: Logger = Logger(label: "chaos.demo.server")
    ) {
        self.listen = listen
        self.rate = rate
        self.logPath = logPath
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.idleTimeout = idleTimeout
        self.queueCapacity = queueCapacity
        self.logger = logger
    }

    /// Produce new downstream messages only this long after starting, then keep every stream (heartbeats,
    /// acknowledgements, retransmissions on resume) with nothing new; nil: produce until stopped. Set it after `init`.
    package var sendFor: ChaosDuration?
    /// Produce new downstream messages only until this wall-clock moment (with ``sendFor``: whichever comes first).
    package var sendUntil: Date?

    /// A planted bug (for trying `chaos shrink` on a sequence-dependent failure): when a HELLO takes a stream over from
    /// a connection the server has not yet seen die (a half-open one), it believes every message it wrote there
    /// arrived and resumes past them without a GAP, on this share of takeovers (0: never, 1: always). Only a fault
    /// that leaves the server's side open while the client reconnects (a partition, a client-only cut, a handoff)
    /// loses messages; a reset, which both sides see, does not. Set it after `init`.
    package var takeoverBug: Double = 0

    /// The idle timeout in force.
    package var effectiveIdleTimeout: ChaosDuration {
        idleTimeout ?? ChaosDuration(nanoseconds: 3 * heartbeatInterval.nanoseconds + heartbeatTimeout.nanoseconds)
    }

    /// Throws `ChaosError.badInput` for values that cannot work.
    package func validate() throws {
        guard rate >= 0, rate.isFinite, rate <= 100_000 else { throw ChaosError.badInput("--rate must be between 0 and 100000, got \(rate)") }
        guard queueCapacity >= 1 else { throw ChaosError.badInput("--queue must be at least 1, got \(queueCapacity)") }
        guard heartbeatInterval.nanoseconds > 0, heartbeatTimeout.nanoseconds > 0 else {
            throw ChaosError.badInput("heartbeat interval and timeout must be positive")
        }
        if let idleTimeout, idleTimeout.nanoseconds <= 0 { throw ChaosError.badInput("--idle-timeout must be positive") }
    }
}
