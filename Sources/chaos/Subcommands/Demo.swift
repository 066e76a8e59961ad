import ArgumentParser
import ChaosCore
import ChaosDemo
import ChaosTLS
import Dispatch
import Foundation

/// `chaos demo`: the built-in reference pair (PRODUCT §6).
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "The built-in reference pair: a resilient NDJSON stream server and client (and a naive client).",
        subcommands: [DemoServerCommand.self, DemoClientCommand.self]
    )
}

/// `chaos demo server`.
struct DemoServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "server", abstract: "Run the reference stream server.")

    @Option(help: "Address to listen on, HOST:PORT (port 0 picks a free one and prints it).")
    var listen = "127.0.0.1:7001"
    @Option(help: "Downstream messages per second on each stream.")
    var rate: Double = 20
    @Option(help: "JSONL file of processed upstream messages and connection events.")
    var log: String?
    @Option(help: "Heartbeat interval the clients use (e.g. 1s).")
    var heartbeat = "1s"
    @Option(help: "Heartbeat timeout the clients use (e.g. 3s).")
    var heartbeatTimeout = "3s"
    @Option(help: "Close connections silent this long (default 3 × heartbeat + timeout).")
    var idleTimeout: String?
    @Option(help: "Most unacknowledged downstream messages kept per stream.")
    var queue = 1000
    @Option(
        help:
            "Produce new messages only this long after starting (e.g. 9m), then keep every stream with nothing new: a soak's quiet end, nothing in flight when the pair stops (tcp or websocket)."
    )
    var sendFor: String?
    @Option(
        help:
            "Produce new messages only until this RFC 3339 moment (e.g. 2026-11-27T12:09:00Z), then as --send-for: a quiet end shared by processes that start one after another (tcp or websocket)."
    )
    var sendUntil: String?
    @Option(
        help:
            "tcp (NDJSON lines), websocket (one text message per line, WebSocket pings as heartbeats) or grpc (one bidirectional-streaming call, HTTP/2 keepalive)."
    )
    var transport = "tcp"
    @Option(help: "Serve TLS with this certificate chain (PEM), e.g. Scenarios/tls/demo-server.pem.")
    var tlsCert: String?
    @Option(help: "The private key of --tls-cert (PEM; default: the --tls-cert file).")
    var tlsKey: String?
    @Option(
        help:
            "A planted bug, to try chaos shrink on (tcp, websocket): when a HELLO takes a stream over from a connection the server has not seen die, it believes what it wrote there arrived and resumes past it, silently, on this share of takeovers (0 to 1; 1 always)."
    )
    var takeoverBug: Double = 0

    func validate() throws {
        guard (0...1).contains(takeoverBug) else { throw ValidationError("--takeover-bug must be from 0 to 1, found \(takeoverBug)") }
    }

    func run() async throws {
        var config = DemoServerConfiguration(
            listen: try DemoAddress(parsing: listen),
            rate: rate,
            logPath: log,
            heartbeatInterval: try DemoDurationFlag.parse(heartbeat, flag: "--heartbeat"),
            heartbeatTimeout: try DemoDurationFlag.parse(heartbeatTimeout, flag: "--heartbeat-timeout"),
            idleTimeout: try idleTimeout.map { try DemoDurationFlag.parse($0, flag: "--idle-timeout") },
            queueCapacity: queue
        )
        config.transport = try DemoTransportFlag.parse(transport)
        config.sendFor = try DemoDurationFlag.sendFor(sendFor, transport: config.transport)
        config.sendUntil = try DemoDurationFlag.sendUntil(sendUntil, transport: config.transport)
        config.takeoverBug = takeoverBug
        if tlsKey != nil, tlsCert == nil { throw ValidationError("--tls-key needs --tls-cert") }
        config.tls = tlsCert.map { DemoServerTLS(certificate: $0, key: tlsKey ?? $0) }
        let server = DemoServer(configuration: config)
        let signals = DemoSignals { await server.stop() }
        let bound = try await server.start()
        // Written straight to the descriptor: the runner reads this line while stdout is a pipe.
        FileHandle.standardOutput.write(Data("listening on \(bound)\n".utf8))
        await signals.started()
        await server.run()
        signals.cancel()
    }
}

/// `chaos demo client`.
struct DemoClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "client", abstract: "Run the reference stream client.")

    @Option(help: "Server (or proxy) address, HOST:PORT.")
    var connect = "127.0.0.1:7000"
    @Option(
        name: .customLong("also-connect"),
        help:
            "Another address of the server (repeatable): each reconnect takes the next address in turn, as a phone moving between WiFi and LTE reaches another node (TCP transport)."
    )
    var alsoConnect: [String] = []
    @Option(help: "Logical stream name.")
    var stream = "c1"
    @Option(
        help:
            "Run this many clients in one process, streams STREAM-1…STREAM-N, each with its own --log and --state (the number goes before the file's extension), their first connects spread over the addresses."
    )
    var streams = 1
    @Option(help: "Upstream messages per second.")
    var rate: Double = 20
    @Option(help: "JSONL file of processed downstream messages and connection events.")
    var log: String?
    @Option(help: "File where the resume point is persisted, so a restarted client resumes.")
    var state: String?
    @Flag(help: "Do reconnection wrong: reconnect at once, no resume, no retransmission, no heartbeat.")
    var naive = false
    @Option(help: "Stop after this long (e.g. 90s).")
    var duration: String?
    @Option(help: "Seed of the reconnect jitter (default: derived from the stream name).")
    var seed: UInt64?
    @Option(help: "Backoff base (full jitter).")
    var backoffBase = "500ms"
    @Option(help: "Backoff cap.")
    var backoffCap = "32s"
    @Option(help: "Heartbeat interval.")
    var heartbeat = "1s"
    @Option(help: "Heartbeat timeout: an unanswered PING closes the connection.")
    var heartbeatTimeout = "3s"
    @Option(help: "Most unacknowledged upstream messages kept.")
    var queue = 1000
    @Option(
        help:
            "Produce new messages only this long after starting (e.g. 9m), then stay connected with nothing new: a soak's quiet end, nothing in flight when the pair stops (tcp or websocket)."
    )
    var sendFor: String?
    @Option(help: "Produce new messages only until this RFC 3339 moment, then as --send-for (tcp or websocket).")
    var sendUntil: String?
    @Option(
        help:
            "tcp (NDJSON lines), websocket (the stream named in an X-Chaos-Stream upgrade header) or grpc (x-chaos-stream metadata, HTTP/2 keepalive)."
    )
    var transport = "tcp"
    @Flag(help: "Speak TLS, trusting chaos's CA (chaos ca; $CHAOS_HOME), as an app under test that trusts it does.")
    var tls = false
    @Option(help: "Speak TLS, trusting the roots in this PEM file instead of chaos's CA.")
    var tlsCa: String?
    @Option(help: "The TLS server name sent (SNI) and verified.")
    var tlsServerName = "localhost"

    func run() async throws {
        var config = DemoClientConfiguration(
            connect: try DemoAddress(parsing: connect),
            stream: stream,
            rate: rate,
            logPath: log,
            statePath: state,
            naive: naive,
            duration: try duration.map { try DemoDurationFlag.parse($0, flag: "--duration") },
            seed: seed,
            backoff: BackoffPolicy(
                base: try DemoDurationFlag.parse(backoffBase, flag: "--backoff-base"),
                cap: try DemoDurationFlag.parse(backoffCap, flag: "--backoff-cap")
            ),
            heartbeatInterval: try DemoDurationFlag.parse(heartbeat, flag: "--heartbeat"),
            heartbeatTimeout: try DemoDurationFlag.parse(heartbeatTimeout, flag: "--heartbeat-timeout"),
            queueCapacity: queue
        )
        config.transport = try DemoTransportFlag.parse(transport)
        config.sendFor = try DemoDurationFlag.sendFor(sendFor, transport: config.transport)
        config.sendUntil = try DemoDurationFlag.sendUntil(sendUntil, transport: config.transport)
        config.alsoConnect = try alsoConnect.map { try DemoAddress(parsing: $0) }
        if !config.alsoConnect.isEmpty, config.transport == .grpc {
            throw ValidationError("--also-connect works with --transport tcp or websocket")
        }
        if tls || tlsCa != nil {
            guard TLSSpec.isServerName(tlsServerName) else {
                throw ValidationError("--tls-server-name must be a host name, found '\(tlsServerName)'")
            }
            let roots = try tlsCa ?? CertificateAuthority.own().certificatePath
            guard FileManager.default.isReadableFile(atPath: roots) else { throw ValidationError("--tls-ca: cannot read '\(roots)'") }
            config.tls = DemoClientTLS(trustRoots: roots, serverName: tlsServerName)
        }
        guard (1...10_000).contains(streams) else { throw ValidationError("--streams must be 1 to 10000, found \(streams)") }
        let clients = (1...streams).map { index in
            var one = config
            if streams > 1 {
                one.stream = "\(stream)-\(index)"
                one.logPath = log.map { Self.numbered($0, index) }
                one.statePath = state.map { Self.numbered($0, index) }
                one.firstAddress = index - 1
            }
            return DemoClient(configuration: one)
        }
        // Every stream stops at once: each drains its connection (up to 2 s), so one after another would take hours.
        let signals = DemoSignals {
            await withTaskGroup(of: Void.self) { group in
                for client in clients { group.addTask { await client.stop() } }
            }
        }
        // Every stream starts at once: one after another, 300 streams took 8 s to start under a CPU hog, and the last
        // ones connected too late to be sent anything before the pair's --send-for ended.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { try await client.start() } }
            try await group.waitForAll()
        }
        await signals.started()
        await withTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { await client.run() } }
        }
        signals.cancel()
    }
}

extension DemoClientCommand {
    /// `path` with `-index` before its extension: `logs/c.jsonl` → `logs/c-3.jsonl`.
    static func numbered(_ path: String, _ index: Int) -> String {
        let url = URL(fileURLWithPath: path)
        let ext = url.pathExtension
        let stem = url.deletingPathExtension().lastPathComponent + "-\(index)"
        return url.deletingLastPathComponent().appendingPathComponent(ext.isEmpty ? stem : stem + "." + ext).path
    }
}

/// Duration flags of the demo commands.
enum DemoDurationFlag {
    /// Parses `250ms`, `1s`…; bad text is bad input naming the flag.
    static func parse(_ text: String, flag: String) throws -> ChaosDuration {
        guard let value = ChaosDuration(parsing: text) else {
            throw ChaosError.badInput("\(flag) expects a duration like 500ms, 3s or 2m, got '\(text)'")
        }
        return value
    }

    /// `--send-for`: a duration, for the tcp and websocket transports (gRPC's engines produce until stopped).
    static func sendFor(_ text: String?, transport: DemoTransport) throws -> ChaosDuration? {
        guard let text else { return nil }
        guard transport != .grpc else { throw ValidationError("--send-for works with --transport tcp or websocket") }
        return try parse(text, flag: "--send-for")
    }

    /// `--send-until`: an RFC 3339 moment, for the tcp and websocket transports.
    static func sendUntil(_ text: String?, transport: DemoTransport) throws -> Date? {
        guard let text else { return nil }
        guard transport != .grpc else { throw ValidationError("--send-until works with --transport tcp or websocket") }
        guard let date = AgentOptions.date(text) else {
            throw ChaosError.badInput("--send-until expects an RFC 3339 time such as 2026-11-27T12:09:00Z, got '\(text)'")
        }
        return date
    }
}

/// SIGINT / SIGTERM run `stop` once (which flushes logs and state), instead of killing the process. Made before
/// start-up: a signal that comes while the process starts (a run stopped as its pair was starting: a client killed
/// by SIGTERM exited 143 in a fresh-clone run) runs `stop` once ``started()`` says start-up is over, never during it.
final class DemoSignals {
    private let sources: [any DispatchSourceSignal]
    private let startUp = StartUp()

    init(stop: @escaping @Sendable () async -> Void) {
        let queue = DispatchQueue(label: "chaos.demo.signals")
        let startUp = self.startUp
        sources = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                Task {
                    await startUp.waitUntilOver()
                    await stop()
                }
            }
            source.resume()
            return source
        }
    }

    /// Start-up is over: a signal stops the process from now on (one that came during start-up, now).
    func started() async { await startUp.end() }

    /// Whether start-up is over, and who waits for it to be.
    private actor StartUp {
        private var isOver = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func waitUntilOver() async {
            guard !isOver else { return }
            await withCheckedContinuation { waiting.append($0) }
        }

        func end() {
            isOver = true
            for continuation in waiting { continuation.resume() }
            waiting = []
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}

/// `--transport tcp|websocket|grpc`.
enum DemoTransportFlag {
    static func parse(_ text: String) throws -> DemoTransport {
        guard let transport = DemoTransport(rawValue: text) else {
            throw ValidationError("--transport must be one of \(DemoTransport.allCases.map(\.rawValue).joined(separator: ", ")), found '\(text)'")
        }
        return transport
    }
}
