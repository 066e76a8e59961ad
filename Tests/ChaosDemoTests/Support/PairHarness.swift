import ChaosCore
import ChaosDemo
import Foundation

/// A server, a client and (optionally) a relay between them, with log files in a fresh temp directory.
struct PairHarness {
    let directory: String
    let server: DemoServer
    let serverPort: Int
    let transport: DemoTransport

    var serverLog: String { directory + "/server.jsonl" }
    var clientLog: String { directory + "/client.jsonl" }
    var statePath: String { directory + "/client-state.json" }

    /// Starts a server on 127.0.0.1:0 with fast heartbeats.
    static func start(
        rate: Double = 100,
        heartbeat: ChaosDuration = .milliseconds(200),
        heartbeatTimeout: ChaosDuration = .milliseconds(400),
        transport: DemoTransport = .tcp,
        sendFor: ChaosDuration? = nil
    ) async throws -> PairHarness {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("chaos-demo-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var configuration = DemoServerConfiguration(
            listen: DemoAddress(host: "127.0.0.1", port: 0),
            rate: rate,
            logPath: directory + "/server.jsonl",
            heartbeatInterval: heartbeat,
            heartbeatTimeout: heartbeatTimeout
        )
        configuration.transport = transport
        configuration.sendFor = sendFor
        let server = DemoServer(configuration: configuration)
        let address = try await server.start()
        return PairHarness(directory: directory, server: server, serverPort: address.port, transport: transport)
    }

    /// A client of stream c1 connecting to `port` (the server's or a relay's).
    func client(
        port: Int,
        rate: Double = 100,
        naive: Bool = false,
        queueCapacity: Int = 1000,
        heartbeat: ChaosDuration = .milliseconds(200),
        heartbeatTimeout: ChaosDuration = .milliseconds(400),
        sendFor: ChaosDuration? = nil
    ) -> DemoClient {
        var configuration = DemoClientConfiguration(
            connect: DemoAddress(host: "127.0.0.1", port: port),
            stream: "c1",
            rate: rate,
            logPath: clientLog,
            statePath: naive ? nil : statePath,
            naive: naive,
            seed: 9,
            backoff: BackoffPolicy(base: .milliseconds(100), cap: .seconds(Int64(1))),
            heartbeatInterval: heartbeat,
            heartbeatTimeout: heartbeatTimeout,
            queueCapacity: queueCapacity
        )
        configuration.transport = transport
        configuration.sendFor = sendFor
        return DemoClient(configuration: configuration)
    }

    func removeFiles() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; returns whether it held.
func eventually(within seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
