import ChaosCore
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Synchronization

/// `chaos demo server --transport grpc`: the reference server as a gRPC service (grpc-swift 2 over HTTP/2,
/// cleartext), with client keepalive allowed so that a half-open connection is noticed by HTTP/2 PINGs.
final class GRPCServerEngine: Sendable {
    let configuration: DemoServerConfiguration
    private let state = Mutex<(server: GRPCServer<HTTP2ServerTransport.Posix>?, task: Task<Void, any Error>?, log: ProcessedLog?)>((nil, nil, nil))
    private let streams = Mutex<GRPCServerStreams?>(nil)

    init(configuration: DemoServerConfiguration) {
        self.configuration = configuration
    }

    func start() async throws -> DemoAddress {
        let log = try ProcessedLog(path: configuration.logPath)
        let streams = GRPCServerStreams(queueCapacity: configuration.queueCapacity, log: log)
        var config = HTTP2ServerTransport.Posix.Config.defaults
        config.connection.keepalive.clientBehavior = .init(minPingIntervalWithoutCalls: .milliseconds(100), allowWithoutCalls: true)
        // The server pings too, so that a client gone half-open does not keep its call (and the stream) forever;
        // the interval is stretched past the timeout for the reason GRPCClientEngine gives.
        let timeout = configuration.heartbeatTimeout.nanoseconds
        config.connection.keepalive.time = .nanoseconds(max(configuration.heartbeatInterval.nanoseconds, timeout + 50_000_000))
        config.connection.keepalive.timeout = .nanoseconds(timeout)
        // A graceful shutdown waits at most this long for connections to close (a half-open one never would).
        config.connection.maxGraceTime = .seconds(1)
        var security = HTTP2ServerTransport.Posix.TransportSecurity.plaintext
        if let tls = configuration.tls {
            _ = try tls.context(alpn: ["h2"])  // bad files are the user's input: said now, not when a client comes
            security = .tls(certificateChain: [.file(path: tls.certificate, format: .pem)], privateKey: .file(path: tls.key, format: .pem))
        }
        let transport = HTTP2ServerTransport.Posix(
            address: .ipv4(host: configuration.listen.host, port: configuration.listen.port),
            transportSecurity: security,
            config: config
        )
        let server = GRPCServer(transport: transport, services: [GRPCDemoService(streams: streams, rate: configuration.rate)])
        let task = Task { try await server.serve() }
        guard let address = try await transport.listeningAddress.ipv4 else {
            server.beginGracefulShutdown()
            log.close()
            throw ChaosError(.network, "cannot listen on \(configuration.listen)")
        }
        self.streams.withLock { $0 = streams }
        state.withLock { $0 = (server, task, log) }
        log.event("listening", ["address": "\(address.host):\(address.port)"])
        return DemoAddress(host: address.host, port: address.port)
    }

    func run() async {
        _ = try? await state.withLock { $0.task }?.value
    }

    func stop() async {
        let (server, task, log) = state.withLock { $0 }
        server?.beginGracefulShutdown()
        // Calls end when their clients see the server go away; what is still open after 2 s is cancelled, and
        // the stop does not wait past 4 s whatever the transport does.
        let (ended, end) = AsyncStream.makeStream(of: Void.self)
        let waiter = Task {
            _ = try? await task?.value
            end.finish()
        }
        let deadline = Task {
            try? await Task.sleep(nanoseconds: 2_000_000_000)
            task?.cancel()
            try? await Task.sleep(nanoseconds: 2_000_000_000)
            end.finish()
        }
        for await _ in ended {}
        waiter.cancel()
        deadline.cancel()
        log?.event("stopped")
        log?.close()
    }

    func status(of name: String) -> DemoStreamStatus? {
        streams.withLock { $0 }?.status(of: name, accepted: 0)
    }
}
