package import ChaosCore
import NIOCore
import NIOPosix

/// The reference client of `chaos demo client`: sends its upstream stream at a steady rate and processes
/// the server's downstream stream exactly once and in order, through any number of reconnects
/// (resume handshake, retransmission, deduplication, heartbeat, full-jitter backoff, persisted resume
/// point). With `naive` it does none of that, so the audit has something to catch.
///
/// Use: `try await client.start()`, then `await client.run()` (returns when stopped or the duration ends).
package final class DemoClient: Sendable {
    /// The settings the client was made with.
    package let configuration: DemoClientConfiguration
    /// The NIO engine (TCP and WebSocket), or the gRPC one.
    private let backend: Backend

    private enum Backend: Sendable {
        case nio(ClientEngine)
        case grpc(GRPCClientEngine)
    }

    /// A client that does nothing until ``start()``.
    package init(configuration: DemoClientConfiguration) {
        self.configuration = configuration
        backend =
            configuration.transport == .grpc
            ? .grpc(GRPCClientEngine(configuration: configuration))
            : .nio(ClientEngine(configuration: configuration, loop: MultiThreadedEventLoopGroup.singleton.next()))
    }

    /// Validates the configuration, restores the state file, opens the log and starts connecting
    /// (it does not wait for the connection: a server that is not up yet is retried with backoff).
    package func start() async throws {
        try configuration.validate()
        switch backend {
        case .nio(let engine): try await engine.start()
        case .grpc(let engine): try await engine.start()
        }
    }

    /// Waits until the client has stopped (``stop()`` or the configured duration).
    package func run() async {
        switch backend {
        case .nio(let engine): try? await engine.stoppedPromise.futureResult.get()
        case .grpc(let engine): await engine.run()
        }
    }

    /// Stops producing and reconnecting, persists the state, closes the connection and the log.
    package func stop() async {
        switch backend {
        case .nio(let engine): try? await engine.loop.flatSubmit { engine.stop() }.get()
        case .grpc(let engine): await engine.stop()
        }
    }

    /// A snapshot of the client's progress.
    package func status() async -> DemoClientStatus {
        switch backend {
        case .nio(let engine): (try? await engine.loop.submit { engine.snapshot() }.get()) ?? DemoClientStatus()
        case .grpc(let engine): engine.snapshot()
        }
    }
}

/// What the client has done so far (for tests and diagnostics).
package struct DemoClientStatus: Hashable, Sendable {
    /// TCP connections opened.
    package var connectionsOpened = 0
    /// Connections that got as far as WELCOME.
    package var connectionsResumed = 0
    /// Disconnects (and failed attempts) by reason.
    package var disconnects: [DisconnectReason: Int] = [:]
    /// Last downstream seq processed.
    package var lastProcessedDown = 0
    /// Last upstream seq assigned.
    package var lastAssignedUp = 0
    /// Highest upstream seq the server acknowledged.
    package var acknowledgedUp = 0
    /// Upstream messages waiting for the server's ack.
    package var unacknowledgedUp = 0
    /// Reconnect delays chosen so far, in order.
    package var reconnectDelays: [ChaosDuration] = []
    /// Whether a resumed connection is up now.
    package var established = false

    /// An empty status.
    package init() {}
}
