import ChaosCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client's state and behaviour, confined to one event loop.
///
/// `@unchecked Sendable` is safe because every mutable property is read and written only on `loop`:
/// every channel is bootstrapped onto `loop` (so handler callbacks, future callbacks and timers run
/// there), and ``DemoClient`` reaches the engine from outside only through `loop.submit` /
/// `loop.flatSubmit`; `start()` does its file work before hopping onto the loop.
final class ClientEngine: WireConnectionDelegate, @unchecked Sendable {
    /// How long ``stop()`` waits for the server to close its side before cutting the connection.
    static let stopDrain = TimeAmount.seconds(2)

    let configuration: DemoClientConfiguration
    let loop: any EventLoop
    let stoppedPromise: EventLoopPromise<Void>
    var log: ProcessedLog?
    var stateFile: ClientStateFile?
    var upstream: OutboundQueue
    var downstream: InboundSequencer
    var schedule: ReconnectSchedule
    var channel: (any Channel)?
    /// The last connection that came up (a connection that closes without coming up is a failed connect).
    var lastActivated: (any Channel)?
    var established = false
    var needsAck = false
    var closingBecause: DisconnectReason?
    var producer: RepeatedTask?
    /// How long new messages are produced (`sendFor` from the engine's making).
    let sendWindow: SendWindow
    var heartbeat: RepeatedTask?
    var pingTimeout: Scheduled<Void>?
    /// When the heartbeat last ran and when its outstanding PING went out: a tick that comes late (the loop was held)
    /// or a PING left unanswered past its timeout (the timeout did not fire) is logged, to tell the two apart.
    var lastHeartbeatTick: NIODeadline?
    var pingSentAt: NIODeadline?
    var reconnect: Scheduled<Void>?
    /// Connection attempts so far: each takes the next of the configured addresses.
    var attempts = 0
    var deadline: Scheduled<Void>?
    var stopped = false
    var status = DemoClientStatus()
    var stream: String { configuration.stream }
    var naive: Bool { configuration.naive }

    init(configuration: DemoClientConfiguration, loop: any EventLoop) {
        self.configuration = configuration
        self.loop = loop
        self.stoppedPromise = loop.makePromise()
        self.sendWindow = SendWindow(sendFor: configuration.sendFor, sendUntil: configuration.sendUntil)
        self.upstream = OutboundQueue(capacity: configuration.queueCapacity)
        self.downstream = InboundSequencer(deduplicates: !configuration.naive)
        self.schedule = ReconnectSchedule(
            policy: configuration.backoff,
            generator: SeededGenerator(seed: configuration.effectiveSeed).fork("reconnect")
        )
    }

    func start() async throws {
        let stateFile = configuration.statePath.map(ClientStateFile.init(path:))
        let restored = try stateFile?.load(stream: stream)
        let processedLog = try ProcessedLog(path: configuration.logPath)
        try await loop.submit {
            self.log = processedLog
            self.stateFile = stateFile
            if let restored {
                self.upstream = OutboundQueue(capacity: self.configuration.queueCapacity, lastAssigned: restored.lastAssignedUp)
                self.downstream = InboundSequencer(lastProcessed: restored.lastProcessedDown, deduplicates: !self.naive)
                processedLog.event(
                    "restored",
                    [
                        "stream": self.stream, "last_processed_down": restored.lastProcessedDown,
                        "last_assigned_up": restored.lastAssignedUp,
                    ]
                )
            }
            self.startProducer()
            if let duration = self.configuration.duration {
                self.deadline = self.loop.scheduleTask(in: .nanoseconds(duration.nanoseconds)) { _ = self.stop() }
            }
            self.connect()
        }.get()
    }

    func stop() -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        guard !stopped else { return stoppedPromise.futureResult }
        stopped = true
        for task in [producer, heartbeat] { task?.cancel() }
        for task in [pingTimeout, reconnect, deadline] { task?.cancel() }
        persist()
        let closed =
            channel.map { channel -> EventLoopFuture<Void> in
                closingBecause = .stopped
                return drainAndClose(channel)
            } ?? loop.makeSucceededVoidFuture()
        return closed.map {
            self.persist()
            self.log?.unacknowledged(direction: "up", stream: self.stream, seqs: self.upstream.unacknowledged)
            self.log?.event("stopped", ["stream": self.stream])
            self.log?.close()
            self.stoppedPromise.succeed()
        }
    }

    /// Ends the connection without leaving anything the server wrote unprocessed: sends FIN after
    /// everything this client sent, keeps reading (and processing) until the server closes its side,
    /// then closes. A full close instead would discard whatever already sits unread in this socket,
    /// messages the proxy and the server count as delivered. A peer that does not close within
    /// ``stopDrain`` is cut.
    private func drainAndClose(_ channel: any Channel) -> EventLoopFuture<Void> {
        let cutoff = loop.scheduleTask(in: Self.stopDrain) { [loop] in
            // One more turn of the loop before the cut: what already sits in the socket (the server's last messages,
            // its FIN) is read and processed first. NIO handles readiness before the tasks that are due, but a task
            // due now that this one scheduled would run in the same turn. A starved client (fresh-clone run s64q2's
            // 300-stream phone) otherwise cut with a WELCOME and a message its kernel had taken tens of ms before.
            loop.scheduleTask(in: .milliseconds(1)) { channel.close(promise: nil) }
        }
        channel.close(mode: .output, promise: nil)
        return channel.closeFuture.always { _ in cutoff.cancel() }.recover { _ in }
    }

    /// The status counters completed with the live sequence state.
    func snapshot() -> DemoClientStatus {
        var snapshot = status
        snapshot.lastProcessedDown = downstream.lastProcessed
        snapshot.lastAssignedUp = upstream.lastAssigned
        snapshot.acknowledgedUp = upstream.acknowledged
        snapshot.unacknowledgedUp = upstream.unacknowledgedCount
        snapshot.established = established
        return snapshot
    }

    // MARK: Connecting

    func connect() {
        reconnect = nil
        guard !stopped else { return }
        let target = configuration.addresses[(configuration.firstAddress + attempts) % configuration.addresses.count]
        attempts += 1
        ClientBootstrap(group: loop)
            .connectTimeout(.nanoseconds(configuration.connectTimeout.nanoseconds))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { [configuration] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls = configuration.tls {
                        let context = try tls.context(alpn: configuration.transport == .websocket ? ["http/1.1"] : [])
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: tls.serverName))
                    }
                    switch configuration.transport {
                    case .tcp, .grpc:  // gRPC has its own engine: never here
                        try channel.pipeline.syncOperations.addHandlers([
                            ByteToMessageHandler(LineFrameDecoder()), WireHandler(delegate: self),
                        ])
                    case .websocket:
                        try WebSocketTransport.configureClient(
                            channel,
                            host: "\(target.host):\(target.port)",
                            stream: configuration.stream,
                            upgradeTimeout: .nanoseconds(configuration.heartbeatTimeout.nanoseconds)
                        ) { WireHandler(delegate: self) }
                    }
                }
            }
            .connect(host: target.host, port: target.port)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    if self.stopped { channel.close(promise: nil) }
                    // A connection that closes before it is up (a TLS handshake refused, a WebSocket upgrade that
                    // failed) reports nothing else: it is a failed connect, and the client tries again.
                    channel.closeFuture.whenComplete { _ in
                        guard !self.stopped, self.lastActivated !== channel else { return }
                        self.log?.event("connect-failed", ["stream": self.stream, "error": "closed before the connection was up"])
                        self.status.disconnects[.connectFailed, default: 0] += 1
                        self.scheduleReconnect(after: .connectFailed)
                    }
                case .failure(let error):
                    self.log?.event("connect-failed", ["stream": self.stream, "error": "\(error)"])
                    self.status.disconnects[.connectFailed, default: 0] += 1
                    self.scheduleReconnect(after: .connectFailed)
                }
            }
    }

    func scheduleReconnect(after reason: DisconnectReason) {
        guard !stopped, reconnect == nil else { return }
        let delay: ChaosDuration
        if naive {
            // Naive: straight back in. A short pause only after a refused attempt, so it does not spin a core.
            delay = reason == .connectFailed ? .milliseconds(100) : .zero
        } else {
            delay = schedule.nextDelay(after: reason)
        }
        status.reconnectDelays.append(delay)
        if status.reconnectDelays.count > 256 { status.reconnectDelays.removeFirst(128) }
        log?.event("reconnect", ["stream": stream, "after": reason.rawValue, "delay_ms": Int(delay.nanoseconds / 1_000_000)])
        reconnect = loop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) { self.connect() }
    }

    static func isReset(_ error: (any Error)?) -> Bool {
        guard let io = error as? IOError else { return false }
        return io.errnoCode == ECONNRESET || io.errnoCode == EPIPE
    }

    // MARK: Producing

    func startProducer() {
        guard configuration.rate > 0, sendWindow.isOpen else { return }
        let period = TimeAmount.nanoseconds(Int64((1e9 / configuration.rate).rounded()))
        producer = loop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in self.produce() }
    }

    /// One upstream message: number it, keep it until acknowledged (naive: don't), send it if connected.
    func produce() {
        guard !stopped else { return }
        if !sendWindow.isOpen {
            producer?.cancel()
            producer = nil
            return
        }
        let (seq, dropped) = upstream.append()
        if naive {
            upstream.discardUnacknowledged()
        } else if let dropped {
            log?.event("gap-sent", ["dir": "up", "stream": stream, "from": dropped.lowerBound, "to": dropped.upperBound])
            if established {
                channel?.send(WireMessage(.gap, stream: stream, from: dropped.lowerBound, to: dropped.upperBound), flush: false)
            }
        }
        if established, let channel {
            channel.send(.data(stream: stream, direction: "up", seq: seq))
        }
        persist()
    }

    func persist() {
        guard let stateFile else { return }
        let state = ClientState(stream: stream, lastProcessedDown: downstream.lastProcessed, lastAssignedUp: upstream.lastAssigned)
        do {
            try stateFile.save(state)
        } catch {
            configuration.logger.warning("cannot persist state", metadata: ["error": "\(error)"])
        }
    }
}
