import ChaosCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// The server's state and behaviour, confined to one event loop.
///
/// `@unchecked Sendable` is safe because every mutable property is read and written only on `loop`:
/// the listener and every accepted channel are bootstrapped onto `loop` (so handler callbacks and the
/// timers they schedule run there), and ``DemoServer`` reaches the engine from outside only through
/// `loop.submit` / `loop.flatSubmit`. `start()` asserts the loop before touching state.
final class ServerEngine: WireConnectionDelegate, @unchecked Sendable {
    let configuration: DemoServerConfiguration
    let loop: any EventLoop
    let stoppedPromise: EventLoopPromise<Void>
    private var logger: Logger { configuration.logger }
    var log = try? ProcessedLog(path: nil)
    private var listener: (any Channel)?
    var streams: [String: ServerStream] = [:]
    private var connections: [ObjectIdentifier: ServerConnection] = [:]
    private var accepted = 0
    var stopped = false
    /// How long new messages are produced (`sendFor` from the engine's making).
    let sendWindow: SendWindow

    init(configuration: DemoServerConfiguration, loop: any EventLoop) {
        self.configuration = configuration
        self.loop = loop
        self.stoppedPromise = loop.makePromise()
        self.sendWindow = SendWindow(sendFor: configuration.sendFor, sendUntil: configuration.sendUntil)
    }

    /// Opens the log and listens; a failure (a port in use, a log that cannot be written) fails ``stoppedPromise`` too,
    /// so that the engine can go without a promise left pending (which NIO reports as a crash in a debug build).
    func start() async throws -> DemoAddress {
        do {
            return try await listen()
        } catch {
            stoppedPromise.fail(error)
            throw error
        }
    }

    private func listen() async throws -> DemoAddress {
        let processedLog = try ProcessedLog(path: configuration.logPath)
        let idle = TimeAmount.nanoseconds(configuration.effectiveIdleTimeout.nanoseconds)
        let tls = try configuration.tls?.context(alpn: configuration.transport == .websocket ? ["http/1.1"] : [])
        let bootstrap = ServerBootstrap(group: loop)
            .serverChannelOption(.backlog, value: 8192)  // a herd of thousands of reconnects at once (capped by net.core.somaxconn)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { [configuration] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idle))
                    switch configuration.transport {
                    case .tcp, .grpc:  // gRPC has its own engine: never here
                        try channel.pipeline.syncOperations.addHandlers([
                            ByteToMessageHandler(LineFrameDecoder()), WireHandler(delegate: self),
                        ])
                    case .websocket:
                        try WebSocketTransport.configureServer(channel) { WireHandler(delegate: self) }
                    }
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: configuration.listen.host, port: configuration.listen.port).get()
        } catch {
            processedLog.close()
            throw ChaosError(.network, "cannot listen on \(configuration.listen)", cause: error)
        }
        return try await loop.submit {
            self.log = processedLog
            self.listener = channel
            let port = channel.localAddress?.port ?? self.configuration.listen.port
            processedLog.event("listening", ["address": "\(self.configuration.listen.host):\(port)"])
            return DemoAddress(host: self.configuration.listen.host, port: port)
        }.get()
    }

    func stop() -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        guard !stopped else { return stoppedPromise.futureResult }
        stopped = true
        for stream in streams.values {
            stream.producer?.cancel()
            stream.producer = nil
        }
        let closes = [listener].compactMap { $0 } + connections.values.map(\.channel)
        let all = closes.map { $0.close().recover { _ in } }
        return EventLoopFuture.andAllComplete(all, on: loop).map {
            for stream in self.streams.values.sorted(by: { $0.name < $1.name }) {
                self.log?.unacknowledged(direction: "down", stream: stream.name, seqs: stream.downstream.unacknowledged)
            }
            self.log?.event("stopped")
            self.log?.close()
            self.stoppedPromise.succeed()
        }
    }

    func status(of name: String) -> DemoStreamStatus? {
        guard let stream = streams[name] else { return nil }
        return DemoStreamStatus(
            lastProcessedUp: stream.upstream.lastProcessed,
            lastAssignedDown: stream.downstream.lastAssigned,
            unacknowledgedDown: stream.downstream.unacknowledgedCount,
            attached: stream.attached != nil,
            connectionsAccepted: accepted
        )
    }

    // MARK: WireConnectionDelegate

    func connectionActive(_ channel: any Channel) {
        if stopped {
            channel.close(promise: nil)
            return
        }
        accepted += 1
        connections[ObjectIdentifier(channel)] = ServerConnection(channel: channel, id: accepted)
        log?.event("accepted", ["connection": accepted])
    }

    func received(_ message: WireMessage, on channel: any Channel) {
        guard let connection = connections[ObjectIdentifier(channel)] else { return }
        switch message.kind {
        case .hello: hello(message, on: connection)
        case .ping: channel.send(WireMessage(.pong), flush: false)
        case .pong, .welcome: break
        case .msg:
            guard let stream = connection.stream, let seq = message.seq else { return }
            switch stream.upstream.accept(seq) {
            case .duplicate:
                return
            case .process:
                break
            case .processAfterHole(let missing):
                log?.event("hole", ["dir": "up", "stream": stream.name, "from": missing.lowerBound, "to": missing.upperBound])
            }
            log?.processed(direction: "up", stream: stream.name, seq: seq)
            connection.needsAck = true
        case .gap:
            guard let stream = connection.stream, let to = message.to else { return }
            if let skipped = stream.upstream.skip(through: to) {
                log?.event(
                    "gap-received",
                    [
                        "dir": "up", "stream": stream.name,
                        "from": skipped.lowerBound, "to": skipped.upperBound,
                    ]
                )
                connection.needsAck = true
            }
        case .ack:
            guard let stream = connection.stream, stream.attached === connection, let ack = message.ack else { return }
            stream.downstream.acknowledge(upTo: ack)
        }
    }

    func readComplete(on channel: any Channel) {
        guard let connection = connections[ObjectIdentifier(channel)] else { return }
        if connection.needsAck, let stream = connection.stream {
            connection.needsAck = false
            channel.send(WireMessage(.ack, stream: stream.name, ack: stream.upstream.lastProcessed), flush: false)
        }
        channel.flush()
    }

    func connectionIdle(_ channel: any Channel) {
        log?.event("idle-timeout", ["connection": connections[ObjectIdentifier(channel)]?.id ?? 0])
        channel.close(promise: nil)
    }

    func connectionInactive(_ channel: any Channel, error: (any Error)?) {
        guard let connection = connections.removeValue(forKey: ObjectIdentifier(channel)) else { return }
        log?.event(
            "disconnected",
            [
                "connection": connection.id, "stream": connection.stream?.name ?? "",
                "reason": error.map { "\($0)" } ?? "closed",
            ]
        )
        if let stream = connection.stream, stream.attached === connection {
            stream.attached = nil
            stream.producer?.cancel()
            stream.producer = nil
        }
    }
}
