package import ChaosCore
package import Foundation
package import Logging

/// Settings of the reference client (`chaos demo client`).
package struct DemoClientConfiguration: Sendable {
    /// The server (or the chaos proxy in front of it).
    package var connect: DemoAddress
    /// More addresses of the same server: each reconnect takes the next one after `connect`, in turn (a phone that
    /// moves between WiFi and LTE reaches the service through another node). Set it after `init`.
    package var alsoConnect: [DemoAddress] = []
    /// Every address, in the order connects take them.
    package var addresses: [DemoAddress] { [connect] + alsoConnect }
    /// The index in ``addresses`` of the first connect (many streams of one process start spread over them).
    package var firstAddress = 0
    /// The logical stream name sent in HELLO.
    package var stream: String
    /// Upstream data messages per second (0: none).
    package var rate: Double
    /// JSONL file of processed downstream messages and events; nil for none.
    package var logPath: String?
    /// File where the resume point is persisted atomically, so a restarted client resumes; nil for none.
    package var statePath: String?
    /// The wrong way: reconnect at once, no resume, no retransmission, no heartbeat.
    package var naive: Bool
    /// Stop by itself after this long; nil runs until stopped.
    package var duration: ChaosDuration?
    /// Produce new messages only this long after starting, then stay connected (heartbeats, acknowledgements,
    /// retransmissions after a reconnect) with nothing new: a soak's quiet end, so nothing is in flight when the
    /// pair stops. nil: produce until stopped. Set it after `init`.
    package var sendFor: ChaosDuration?
    /// Produce new upstream messages only until this wall-clock moment (with ``sendFor``: whichever comes first).
    package var sendUntil: Date?
    /// Seed of the reconnect jitter; nil derives one from the stream name.
    package var seed: UInt64?
    /// Reconnect backoff (full jitter).
    package var backoff: BackoffPolicy
    /// How often a PING is sent.
    package var heartbeatInterval: ChaosDuration
    /// How long a PONG may take before the connection is deemed half-open and closed.
    package var heartbeatTimeout: ChaosDuration
    /// Most unacknowledged upstream messages kept before the oldest become a gap.
    package var queueCapacity: Int
    /// Longest wait for a TCP connect.
    package var connectTimeout: ChaosDuration
    /// TCP (NDJSON lines) or WebSocket (one text message per line, the stream in a request header); set it after `init`.
    package var transport: DemoTransport = .tcp
    /// TLS to the server (or to chaos's `tls:` proxy); nil: cleartext. Set it after `init`.
    package var tls: DemoClientTLS?
    /// Where diagnostics go.
    package var logger: Logger

    /// A configuration with the PRODUCT §6 defaults.
    package init(
        connect: DemoAddress,
        stream: String = "c1",
        rate: Double = 20,
        logPath: String? = nil,
        statePath: String? = nil,
        naive: Bool = false,
        duration: ChaosDuration? = nil,
        seed: UInt64? = nil,
        backoff: BackoffPolicy = .standard,
        heartbeatInterval: ChaosDuration = .seconds(Int64(1)),
        heartbeatTimeout: ChaosDuration = .seconds(Int64(3)),
        queueCapacity: Int = 1000,
        connectTimeout: ChaosDuration = .seconds(Int64(3)),
        logger: Logger = Logger(label: "chaos.demo.client")
    ) {
        self.connect = connect
        self.stream = stream
        self.rate = rate
        self.logPath = logPath
        self.statePath = statePath
        self.naive = naive
        self.duration = duration
        self.seed = seed
        self.backoff = backoff
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.queueCapacity = queueCapacity
        self.connectTimeout = connectTimeout
        self.logger = logger
    }

    /// The jitter seed in force: `seed`, or an FNV-1a hash of the stream name.
    package var effectiveSeed: UInt64 {
        if let seed { return seed }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in stream.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// Throws `ChaosError.badInput` for values that cannot work.
    package func validate() throws {
        guard !stream.isEmpty else { throw ChaosError.badInput("--stream must not be empty") }
        guard rate >= 0, rate.isFinite, rate <= 100_000 else { throw ChaosError.badInput("--rate must be between 0 and 100000, got \(rate)") }
        guard connect.port > 0 else { throw ChaosError.badInput("--connect needs a port above 0, got \(connect)") }
        guard queueCapacity >= 1 else { throw ChaosError.badInput("--queue must be at least 1, got \(queueCapacity)") }
        guard heartbeatInterval.nanoseconds > 0, heartbeatTimeout.nanoseconds > 0 else {
            throw ChaosError.badInput("heartbeat interval and timeout must be positive")
        }
        guard backoff.base.nanoseconds >= 0, backoff.cap >= backoff.base else {
            throw ChaosError.badInput("backoff base must be ≥ 0 and ≤ the cap (base \(backoff.base), cap \(backoff.cap))")
        }
        if let duration, duration.nanoseconds <= 0 { throw ChaosError.badInput("--duration must be positive") }
    }
}
