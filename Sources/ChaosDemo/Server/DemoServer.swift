import ChaosCore
import Logging
import NIOCore
import NIOPosix

/// The reference server of `chaos demo server`: accepts clients, processes their upstream stream
/// exactly once and in order (deduplicating resumed resends), and produces a downstream stream per
/// client at a steady rate, retransmitting what a resuming client has not acknowledged.
///
/// Everything runs on one event loop (listener, connections, timers), so the per-stream state needs
/// no locks. Use: `let address = try await server.start()`, later `await server.stop()`.
package final class DemoServer: Sendable {
    /// The settings the server was made with.
    package let configuration: DemoServerConfiguration
    /// The NIO engine (TCP and WebSocket), or the gRPC one.
    private let backend: Backend

    private enum Backend: Sendable {
        case nio(ServerEngine)
        case grpc(GRPCServerEngine)
    }

    /// A server that does nothing until ``start()``.
    package init(configuration: DemoServerConfiguration) {
        self.configuration = configuration
        backend =
            configuration.transport == .grpc
            ? .grpc(GRPCServerEngine(configuration: configuration))
            : .nio(ServerEngine(configuration: configuration, loop: MultiThreadedEventLoopGroup.singleton.next()))
    }

    /// Validates the configuration, opens the log and binds the listener; returns the bound address
    /// (the real port when the configuration asked for port 0).
    package func start() async throws -> DemoAddress {
        try configuration.validate()
        switch backend {
        case .nio(let engine): return try await engine.start()
        case .grpc(let engine): return try await engine.start()
        }
    }

    /// Waits until the server has stopped.
    package func run() async {
        switch backend {
        case .nio(let engine): try? await engine.stoppedPromise.futureResult.get()
        case .grpc(let engine): await engine.run()
        }
    }

    /// Stops listening, closes every connection and timer and flushes the log.
    package func stop() async {
        switch backend {
        case .nio(let engine): try? await engine.loop.flatSubmit { engine.stop() }.get()
        case .grpc(let engine): await engine.stop()
        }
    }

    /// A snapshot of one stream's state, nil when no client named it yet.
    package func status(ofStream name: String) async -> DemoStreamStatus? {
        switch backend {
        case .nio(let engine): try? await engine.loop.submit { engine.status(of: name) }.get()
        case .grpc(let engine): engine.status(of: name)
        }
    }
}

/// What the server knows about one stream (for tests and diagnostics).
package struct DemoStreamStatus: Hashable, Sendable {
    /// Last upstream seq processed.
    package var lastProcessedUp: Int
    /// Last downstream seq assigned.
    package var lastAssignedDown: Int
    /// Downstream messages waiting for the client's ack.
    package var unacknowledgedDown: Int
    /// Whether a connection currently carries the stream.
    package var attached: Bool
    /// Connections accepted by the server so far (all streams).
    package var connectionsAccepted: Int
}
