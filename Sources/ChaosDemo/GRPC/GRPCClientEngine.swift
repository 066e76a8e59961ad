import ChaosCore
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Synchronization

/// `chaos demo client --transport grpc`: the reference client over one bidirectional-streaming gRPC call at a
/// time (grpc-swift 2, HTTP/2 cleartext). The same resume protocol as over TCP: each call opens with HELLO
/// (the last downstream seq processed) and the server's WELCOME says what to retransmit; cumulative ACKs,
/// deduplication, a GAP on queue overflow, a persisted resume point, full-jitter backoff between calls.
/// HTTP/2 keepalive PINGs are the heartbeat: a half-open connection fails the call, and the next call
/// goes out on a new connection. `naive`: no resume, no retransmission, no keepalive.
final class GRPCClientEngine: Sendable {
    struct State {
        var upstream: OutboundQueue
        var downstream: InboundSequencer
        var schedule: ReconnectSchedule
        var status = DemoClientStatus()
        /// The live call's outbox, once its WELCOME came.
        var outbox: AsyncStream<Chaos_Demo_V1_Envelope>.Continuation?
        /// When the live call last heard from the server (a half-open connection goes silent first).
        var lastHeard = ContinuousClock.now
        var stopped = false
        var tasks: [Task<Void, Never>] = []
    }

    let configuration: DemoClientConfiguration
    private let state: Mutex<State>
    private let resources = Mutex<(log: ProcessedLog?, stateFile: ClientStateFile?, main: Task<Void, Never>?)>((nil, nil, nil))
    private var stream: String { configuration.stream }
    private var naive: Bool { configuration.naive }

    init(configuration: DemoClientConfiguration) {
        self.configuration = configuration
        state = Mutex(
            State(
                upstream: OutboundQueue(capacity: configuration.queueCapacity),
                downstream: InboundSequencer(deduplicates: !configuration.naive),
                schedule: ReconnectSchedule(
                    policy: configuration.backoff,
                    generator: SeededGenerator(seed: configuration.effectiveSeed).fork("reconnect")
                )
            )
        )
    }

    private var log: ProcessedLog? { resources.withLock { $0.log } }

    func start() async throws {
        let stateFile = configuration.statePath.map(ClientStateFile.init(path:))
        let restored = try stateFile?.load(stream: stream)
        let log = try ProcessedLog(path: configuration.logPath)
        if let restored {
            state.withLock { state in
                state.upstream = OutboundQueue(capacity: configuration.queueCapacity, lastAssigned: restored.lastAssignedUp)
                state.downstream = InboundSequencer(lastProcessed: restored.lastProcessedDown, deduplicates: !naive)
            }
            log.event(
                "restored",
                [
                    "stream": stream, "last_processed_down": restored.lastProcessedDown,
                    "last_assigned_up": restored.lastAssignedUp,
                ]
            )
        }
        resources.withLock {
            $0.log = log
            $0.stateFile = stateFile
        }
        var tasks: [Task<Void, Never>] = []
        if configuration.rate > 0 { tasks.append(Task { await self.produce() }) }
        if let duration = configuration.duration {
            tasks.append(
                Task {
                    try? await Task.sleep(nanoseconds: UInt64(duration.nanoseconds))
                    if !Task.isCancelled { await self.stop() }
                }
            )
        }
        state.withLock { $0.tasks = tasks }
        let main = Task { await self.connectLoop() }
        resources.withLock { $0.main = main }
    }

    func run() async {
        await resources.withLock { $0.main }?.value
    }

    /// How long a stop waits for the live call to end cleanly (nanoseconds).
    static let stopGrace: UInt64 = 2_000_000_000

    func stop() async {
        let tasks = state.withLock { state -> [Task<Void, Never>] in
            guard !state.stopped else { return [] }
            state.stopped = true
            state.outbox?.finish()
            return state.tasks
        }
        for task in tasks { task.cancel() }
        // The request stream has ended (the outbox finished): the server sends what it still holds, then ends the
        // call, and everything it wrote is processed, as the TCP client's half-close does. A call that does not
        // end within the grace (no connection, a partition) is cancelled.
        let main = resources.withLock { $0.main }
        let grace = Task {
            try? await Task.sleep(nanoseconds: Self.stopGrace)
            main?.cancel()
        }
        await main?.value
        grace.cancel()
        persist()
        log?.event("stopped", ["stream": stream])
        log?.close()
    }

    func snapshot() -> DemoClientStatus {
        state.withLock { state in
            var status = state.status
            status.lastProcessedDown = state.downstream.lastProcessed
            status.lastAssignedUp = state.upstream.lastAssigned
            status.acknowledgedUp = state.upstream.acknowledged
            status.unacknowledgedUp = state.upstream.unacknowledgedCount
            status.established = state.outbox != nil
            return status
        }
    }

    // MARK: calls

    private func connectLoop() async {
        var config = HTTP2ClientTransport.Posix.Config.defaults
        // grpc-swift-nio-transport 2.9 pings every `time` (its repeating timer restarts itself after each ping)
        // and restarts the ping timeout with each ping: a `time` shorter than the timeout never times out. So the
        // interval is stretched just past the timeout; a half-open connection is then noticed within
        // interval + timeout, as the TCP client's PING/PONG does.
        let timeout = configuration.heartbeatTimeout.nanoseconds
        let interval = max(configuration.heartbeatInterval.nanoseconds, timeout + 50_000_000)
        config.connection.keepalive =
            naive
            ? nil
            : .init(
                time: .nanoseconds(interval),
                timeout: .nanoseconds(timeout),
                allowWithoutCalls: true
            )
        // The transport's own reconnects between calls: short, and without its unseeded jitter (the seeded
        // full-jitter backoff between calls is ours).
        config.backoff = .init(initial: .milliseconds(100), max: .seconds(1), multiplier: 1.6, jitter: 0)
        let target = configuration.connect
        do {
            var security = HTTP2ClientTransport.Posix.TransportSecurity.plaintext
            if let tls = configuration.tls {
                // The SNI name (and :authority) the certificate is checked against; the address stays the one given.
                config.http2.authority = tls.serverName
                security = .tls { $0.trustRoots = .certificates([.file(path: tls.trustRoots, format: .pem)]) }
            }
            let transport = try HTTP2ClientTransport.Posix(
                target: .ipv4(address: target.host, port: target.port),
                transportSecurity: security,
                config: config
            )
            try await withGRPCClient(transport: transport) { client in
                let stub = Chaos_Demo_V1_Stream.Client(wrapping: client)
                while !Task.isCancelled, !state.withLock({ $0.stopped }) {
                    let reason = await call(stub)
                    guard !Task.isCancelled, !state.withLock({ $0.stopped }) else { return }
                    let delay = state.withLock { state -> ChaosDuration in
                        let delay = naive ? (reason == .connectFailed ? .milliseconds(100) : .zero) : state.schedule.nextDelay(after: reason)
                        state.status.reconnectDelays.append(delay)
                        if state.status.reconnectDelays.count > 256 { state.status.reconnectDelays.removeFirst(128) }
                        return delay
                    }
                    log?.event("reconnect", ["stream": stream, "after": reason.rawValue, "delay_ms": Int(delay.nanoseconds / 1_000_000)])
                    try? await Task.sleep(nanoseconds: UInt64(delay.nanoseconds))
                }
            }
        } catch {
            log?.event("client-failed", ["stream": stream, "error": "\(error)"])
        }
    }

    /// One call, from HELLO to its end; returns why it ended.
    private func call(_ stub: Chaos_Demo_V1_Stream.Client<HTTP2ClientTransport.Posix>) async -> DisconnectReason {
        let connection = state.withLock { state -> Int in
            state.status.connectionsOpened += 1
            return state.status.connectionsOpened
        }
        log?.event("connected", ["stream": stream, "connection": connection])
        let (outbox, sending) = AsyncStream.makeStream(of: Chaos_Demo_V1_Envelope.self, bufferingPolicy: .bufferingOldest(4096))
        let hello = state.withLock { state in
            naive
                ? WireMessage(.hello, stream: stream, resume: false)
                : WireMessage(.hello, stream: stream, ack: state.downstream.lastProcessed, resume: true)
        }
        sending.yield(.init(hello))
        state.withLock { $0.lastHeard = .now }
        var reason = DisconnectReason.closed
        do {
            var metadata = Metadata()
            metadata.addString(stream, forKey: "x-chaos-stream")
            // Wait for a connection rather than fail at once while the transport reconnects after a reset.
            var options = CallOptions.defaults
            options.waitForReady = true
            try await stub.exchange(metadata: metadata, options: options) { writer in
                for await envelope in outbox { try await writer.write(envelope) }
            } onResponse: { response in
                for try await envelope in response.messages {
                    guard let message = envelope.wireMessage else { continue }
                    self.received(message, sending: sending)
                }
            }
        } catch let error as RPCError {
            // A call the connection's loss ended: UNAVAILABLE mostly, but a reset that lands while a stream is open
            // can surface as another code (UNKNOWN, INTERNAL) under load. A clean end throws nothing.
            reason = error.code == .cancelled ? .stopped : .reset
        } catch {
            reason = .closed
        }
        sending.finish()
        let stopped = state.withLock { state -> Bool in
            // Dropped after a silence longer than the keepalive interval: the keepalive noticed a half-open connection.
            let silence = ContinuousClock.now - state.lastHeard
            if reason == .reset, silence > .nanoseconds(configuration.heartbeatInterval.nanoseconds) { reason = .heartbeatTimeout }
            state.outbox = nil
            if !state.stopped { state.status.disconnects[reason, default: 0] += 1 }
            return state.stopped
        }
        log?.event("disconnected", ["stream": stream, "reason": stopped ? "stopped" : reason.rawValue])
        return reason
    }

    private func received(_ message: WireMessage, sending: AsyncStream<Chaos_Demo_V1_Envelope>.Continuation) {
        state.withLock { $0.lastHeard = .now }
        switch message.kind {
        case .welcome:
            let out = state.withLock { state -> [WireMessage] in
                state.status.connectionsResumed += 1
                state.schedule.connectionSucceeded()
                state.outbox = sending
                guard !naive else { return [] }
                let (gap, resend) = state.upstream.resume(peerAck: message.ack ?? 0)
                let out =
                    (gap.map { [WireMessage(.gap, stream: stream, from: $0.lowerBound, to: $0.upperBound)] } ?? [])
                    + resend.map { WireMessage.data(stream: stream, direction: "up", seq: $0) }
                // Queued under the lock that made this call the outbox: the producer, which sends a new message on
                // the outbox it reads under the same lock, cannot get one in ahead of the resend (a new seq before
                // the old ones made the server skip them as a hole: messages lost by the pair, under load).
                for message in out { sending.yield(.init(message)) }
                return out
            }
            log?.event(
                naive ? "welcomed" : "resumed",
                [
                    "stream": stream, "peer_ack": message.ack ?? 0,
                    "resent": out.filter { $0.kind == .msg }.count,
                ]
            )
        case .msg:
            guard let seq = message.seq else { return }
            let verdict = state.withLock { $0.downstream.accept(seq) }
            switch verdict {
            case .duplicate: return
            case .processAfterHole(let missing):
                log?.event("hole", ["dir": "down", "stream": stream, "from": missing.lowerBound, "to": missing.upperBound])
            case .process: break
            }
            log?.processed(direction: "down", stream: stream, seq: seq)
            acknowledge(sending)
        case .gap:
            guard let to = message.to, let skipped = state.withLock({ $0.downstream.skip(through: to) }) else { return }
            log?.event("gap-received", ["dir": "down", "stream": stream, "from": skipped.lowerBound, "to": skipped.upperBound])
            acknowledge(sending)
        case .ack:
            if let ack = message.ack, !naive { state.withLock { $0.upstream.acknowledge(upTo: ack) } }
        default:
            break
        }
    }

    /// Persists the resume point, then acknowledges: a restart never asks for less than was acknowledged.
    private func acknowledge(_ sending: AsyncStream<Chaos_Demo_V1_Envelope>.Continuation) {
        persist()
        let ack = state.withLock { $0.downstream.lastProcessed }
        sending.yield(.init(WireMessage(.ack, stream: stream, ack: ack)))
    }

    private func produce() async {
        let period = UInt64((1e9 / configuration.rate).rounded())
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: period)
            let out = state.withLock { state -> [WireMessage] in
                guard !state.stopped else { return [] }
                let (seq, dropped) = state.upstream.append()
                var out: [WireMessage] = []
                if naive {
                    state.upstream.discardUnacknowledged()
                } else if let dropped {
                    out.append(WireMessage(.gap, stream: stream, from: dropped.lowerBound, to: dropped.upperBound))
                }
                out.append(WireMessage.data(stream: stream, direction: "up", seq: seq))
                // Sent in order with a resend: queued under the lock that the welcome queues its resend under.
                if let outbox = state.outbox { for message in out { outbox.yield(.init(message)) } }
                return out
            }
            if let gap = out.first(where: { $0.kind == .gap }) {
                log?.event("gap-sent", ["dir": "up", "stream": stream, "from": gap.from ?? 0, "to": gap.to ?? 0])
            }
            persist()
        }
    }

    private func persist() {
        guard let stateFile = resources.withLock({ $0.stateFile }) else { return }
        let snapshot = state.withLock {
            ClientState(
                stream: stream,
                lastProcessedDown: $0.downstream.lastProcessed,
                lastAssignedUp: $0.upstream.lastAssigned
            )
        }
        try? stateFile.save(snapshot)
    }
}
