import Foundation
import Testing

/// A Python pair of Tests/Fixtures/pairs run straight on loopback over TLS, with no chaos in the path: the clients
/// write NSS key logs, a `tcpdump -i lo` takes the TLS port, and the pair's consumer logs are the ground truth for
/// `chaos audit lo.pcap --keylog keys.log`. The WebSocket pair (`websockets` over wss) speaks TLS itself; the gRPC pair
/// (grpcio, whose BoringSSL writes no key log) goes through tls_terminator.py, Python's OpenSSL answering grpcio's
/// TLS and writing the key log, in front of a cleartext grpcio server.
struct LoopbackTLSPair {
    enum Kind: String, Sendable {
        case websocket, grpc
    }

    static let pairs = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs")

    /// Holds the pair's logs (`server.jsonl`, `client-N.jsonl`), `certs/`, `lo.pcap` and `keys.log`.
    let folder: String
    /// The port the clients speak TLS to (the server's, or the terminator's), the one tcpdump took.
    let port: Int
    /// A scenario whose `protocol:` fits the pair (its proxies are never started: `chaos audit --protocol-from`).
    let scenario: String
    /// How many clients ran.
    let clients: Int

    var capture: String { "\(folder)/lo.pcap" }
    var keylog: String { "\(folder)/keys.log" }

    /// Runs the pair for `seconds` (producing for `seconds - 2.5`, or less with cuts, so everything sent has arrived when it stops) with
    /// `clients` clients. `clientFlags` go to every client (the WebSocket pair's TLS pins, `--reconnect-every`, bugs),
    /// `serverFlags` to the server, `terminatorFlags` to the gRPC pair's terminator (its TLS pins).
    static func run(
        _ kind: Kind,
        name: String,
        seconds: Double = 8,
        clients: Int = 2,
        clientFlags: [String] = [],
        serverFlags: [String] = [],
        terminatorFlags: [String] = []
    ) async throws -> LoopbackTLSPair {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let made = try ChaosCLI.runBlocking(
            ["python3", pairs.appendingPathComponent("test_certs.py").path, "\(folder)/certs"],
            timeout: 30,
            program: "/usr/bin/env"
        )
        try #require(made.status == 0, "\(made.stderr)")
        let port = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == port { upstream = ChaosCLI.freePort() }
        // Producing ends midway between two of the clients' own cuts (`--reconnect-every R`), as far from both as it can
        // be: a resume that drops a message must be followed by more (a hole the logs show), or have nothing to drop.
        // Ending 0.5 s before a cut, a loaded machine's skew between the server's clock and the clients' put the end
        // after it: the last message dropped, no hole in the logs, one lost in the audit.
        var sendFor = String(seconds - 2.5)
        if let flag = clientFlags.firstIndex(of: "--reconnect-every"), let every = Double(clientFlags[flag + 1]) {
            let cuts = ((seconds - 2.5) / every).rounded(.down)
            sendFor = String(((cuts + 0.5) * every <= seconds - 2.5 ? cuts + 0.5 : cuts - 0.5) * every)
        }
        let common = ["--send-for", sendFor] + (kind == .websocket ? ["--heartbeat", "1", "--timeout", "2.5"] : [])
        let script = pairs.appendingPathComponent(kind == .websocket ? "resumable_ws_pair.py" : "grpc_pair.py").path

        var servers = Children()
        var clientProcesses = Children()
        defer {
            clientProcesses.kill()
            servers.kill()
        }
        switch kind {
        case .websocket:
            try servers.start(
                [
                    script, "server", "--listen", "127.0.0.1:\(port)", "--log", "\(folder)/server.jsonl",
                    "--tls-cert", "\(folder)/certs/server.pem",
                ] + common + serverFlags,
                output: "\(folder)/server.out"
            )
        case .grpc:
            try servers.start(
                [script, "server", "--listen", "127.0.0.1:\(upstream)", "--log", "\(folder)/server.jsonl"]
                    + common + serverFlags,
                output: "\(folder)/server.out"
            )
            try servers.start(
                [
                    pairs.appendingPathComponent("tls_terminator.py").path, "--listen", "127.0.0.1:\(port)",
                    "--upstream", "127.0.0.1:\(upstream)", "--tls-cert", "\(folder)/certs/server.pem",
                    "--keylog", "\(folder)/keys-terminator.log",
                ] + terminatorFlags,
                output: "\(folder)/terminator.out"
            )
        }
        for ready in kind == .websocket ? [port] : [port, upstream] {
            try await waitUntilAccepting(ready, folder: folder)
        }
        // Taken once the servers listen: the readiness probes stay out of it.
        let dump = try await LoopbackTcpdump.start(ports: [port], file: "\(folder)/lo.pcap", immediate: true)
        defer { dump.kill() }
        for index in 1...clients {
            var flags =
                [
                    "--connect", "127.0.0.1:\(port)", "--stream", "c\(index)", "--log", "\(folder)/client-\(index).jsonl",
                    "--tls-ca", "\(folder)/certs/upstream-ca.pem", "--server-name", "localhost",
                ] + common
            if kind == .websocket { flags += ["--keylog", "\(folder)/keys-\(index).log"] + clientFlags }
            try clientProcesses.start([script, "client"] + flags, output: "\(folder)/client-\(index).out")
        }
        // The pair's time counts from the clients' connections, not from their start: a Python client on a loaded
        // machine can take seconds to import its libraries, and its production (`--send-for`) counts from its start.
        try await waitUntilConnected(clients: clients, folder: folder)
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        // Clients first (a WebSocket client closes with 1000, a gRPC one cancels its call), then the servers.
        try await clientProcesses.stop()
        try await servers.stop()
        try await dump.stop()
        // One key log for chaos and for tshark (which takes one file).
        var keys = ""
        for name in try FileManager.default.contentsOfDirectory(atPath: folder).sorted() where name.hasPrefix("keys-") {
            keys += try String(contentsOfFile: "\(folder)/\(name)", encoding: .utf8)
        }
        try keys.write(toFile: "\(folder)/keys.log", atomically: true, encoding: .utf8)
        let scenario =
            switch kind {
            case .websocket: WebSocketPairTests.scenario(listen: port, upstream: upstream, bug: "")
            case .grpc: GRPCPairTests.scenario(listen: port, upstream: upstream, fields: .names, flags: "")
            }
        return LoopbackTLSPair(folder: folder, port: port, scenario: try ChaosCLI.scenarioFile(scenario), clients: clients)
    }

    /// Waits (at most 30 s) until every client's log says it connected.
    static func waitUntilConnected(clients: Int, folder: String) async throws {
        for _ in 0..<300 {
            let connected = (1...clients).filter { index in
                let log = (try? String(contentsOfFile: "\(folder)/client-\(index).jsonl", encoding: .utf8)) ?? ""
                return log.contains("\"event\": \"connected\"")
            }
            if connected.count == clients { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        Issue.record("not every client connected within 30 s (\(folder))")
    }

    /// Waits (at most 15 s) until 127.0.0.1:`port` accepts connections.
    static func waitUntilAccepting(_ port: Int, folder: String) async throws {
        for _ in 0..<150 {
            if TCPPort.accepts(port) { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        Issue.record("nothing listens on \(port) after 15 s (\(folder))")
    }

    /// `chaos audit lo.pcap --keylog keys.log --protocol-from SCENARIO --out FOLDER/audit`, with the pair's logs copied
    /// beside the report (``ThirdPartyPairRun/compare(_:oneWay:)`` reads both from one folder). Returns the audit
    /// folder and chaos's result.
    func audit(
        keylog: String? = nil,
        name: String = "audit",
        scenario: String? = nil,
        extra: [String] = []
    ) async throws
        -> (folder: String, result: ChaosCLI.Result)
    {
        let out = "\(folder)/\(name)"
        let result = try await ChaosCLI.run(
            [
                "audit", capture, "--keylog", keylog ?? self.keylog, "--protocol-from", scenario ?? self.scenario,
                "--out", out,
            ] + extra,
            timeout: 120
        )
        if FileManager.default.fileExists(atPath: out) {
            for log in try FileManager.default.contentsOfDirectory(atPath: folder) where log.hasSuffix(".jsonl") {
                try? FileManager.default.copyItem(atPath: "\(folder)/\(log)", toPath: "\(out)/\(log)")
            }
        }
        return (out, result)
    }

    /// The pair's scenario with `framing: auto` instead of its own framing: each connection's protocol is then chosen by
    /// the ALPN its decrypted handshake shows.
    func autoFramingScenario() throws -> String {
        let text = try String(contentsOfFile: scenario, encoding: .utf8)
        // Auto's default format is JSON (a WebSocket pair's); gRPC's protobuf is then said outright.
        let grpcFormat = text.contains("format:") ? "" : "\n  format: protobuf"
        return try ChaosCLI.scenarioFile(
            text
                .replacingOccurrences(of: "framing: websocket", with: "framing: auto")
                .replacingOccurrences(of: "  framing: grpc", with: "  framing: auto" + grpcFormat)
        )
    }

    func remove() { try? FileManager.default.removeItem(atPath: folder) }

    /// The processes a test started: each one's output to a file; stopped with SIGTERM, killed if it lingers.
    struct Children {
        private(set) var processes: [Process] = []

        mutating func start(_ arguments: [String], output: String) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3"] + arguments
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            processes.append(process)
        }

        /// SIGTERM to every one, then 1.5 s for them to end (a scenario's `stop_grace`: grpcio's processes take longer
        /// to wind down than that, and their logs are written line by line); SIGKILL for any still running.
        func stop() async throws {
            for process in processes where process.isRunning { Foundation.kill(process.processIdentifier, SIGTERM) }
            for _ in 0..<75 where processes.contains(where: \.isRunning) { try await Task.sleep(nanoseconds: 20_000_000) }
            kill()
        }

        /// SIGKILL to any still running (on a test's way out).
        func kill() {
            for process in processes where process.isRunning {
                Foundation.kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
    }
}
