import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Debian's Prometheus as a test starts it: one scrape job (`chaos`) on a target every second, optional rule files,
/// its storage in a folder of the test's, listening on a free loopback port of the lane's range. Its HTTP API answers
/// queries as a Grafana panel asks them.
struct PrometheusServer {
    /// Debian's `prometheus` and `promtool` (the `prometheus` package, which `make deps` installs).
    struct Tools {
        var prometheus: String
        var promtool: String
    }

    let process: Process
    let port: Int
    let folder: String

    /// The tools on the PATH (or in /usr/bin); the test fails, naming `make deps`, where they are missing.
    static func tools() throws -> Tools {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin"]
        func find(_ name: String) -> String? {
            path.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        let prometheus = try #require(find("prometheus"), "prometheus is not installed (Debian's prometheus package): run make deps")
        let promtool = try #require(find("promtool"), "promtool is not installed (Debian's prometheus package): run make deps")
        return Tools(prometheus: prometheus, promtool: promtool)
    }

    /// Starts Prometheus scraping `target` (`host:port`, path /metrics) every second and evaluating `rules` every
    /// second; its config, storage and log go under `folder`.
    static func start(_ tools: Tools, scraping target: String, rules: [String], in folder: String) throws -> PrometheusServer {
        let port = ChaosCLI.freePort()
        let config = """
            global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
            rule_files: [\(rules.map { "\"\($0)\"" }.joined(separator: ", "))]
            scrape_configs:
              - job_name: chaos
                static_configs: [{targets: ["\(target)"]}]
            """
        try config.write(toFile: "\(folder)/prometheus.yml", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tools.prometheus)
        process.arguments = [
            "--config.file=\(folder)/prometheus.yml", "--storage.tsdb.path=\(folder)/tsdb",
            "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
        ]
        _ = FileManager.default.createFile(atPath: "\(folder)/prometheus.log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(folder)/prometheus.log"))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        return PrometheusServer(process: process, port: port, folder: folder)
    }

    /// Waits for `GET /-/ready` to answer 200, at most `seconds`.
    func waitUntilReady(within seconds: Double) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, process.isRunning {
            if (try? await Self.get("http://127.0.0.1:\(port)/-/ready").status) == 200 { return true }
            try await Task.sleep(nanoseconds: 200_000_000)
        }
        return false
    }

    /// An instant query (`/api/v1/query`) now: the result's samples as (labels, value); nil when the query failed.
    func query(_ expression: String) async throws -> [(labels: [String: String], value: Double)]? {
        let answer = try await api("/api/v1/query?query=" + Self.encoded(expression))
        guard answer["status"] as? String == "success", let data = answer["data"] as? [String: Any],
            let result = data["result"] as? [[String: Any]]
        else { return nil }
        return result.map { sample in
            let value = (sample["value"] as? [Any])?.last as? String
            return ((sample["metric"] as? [String: String]) ?? [:], value.flatMap(Double.init) ?? .nan)
        }
    }

    /// The values of `label` on the series `match` selects (`/api/v1/label/LABEL/values`): what a Grafana
    /// `label_values(match, label)` variable lists.
    func labelValues(_ label: String, match: String) async throws -> [String] {
        let answer = try await api("/api/v1/label/\(label)/values?match%5B%5D=" + Self.encoded(match))
        return answer["data"] as? [String] ?? []
    }

    /// The rule groups' rules (`/api/v1/rules`), each with its name, health and last error.
    func rules() async throws -> [[String: Any]] {
        let answer = try await api("/api/v1/rules")
        let groups = (answer["data"] as? [String: Any])?["groups"] as? [[String: Any]] ?? []
        return groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s; returns whether it exited by itself.
    @discardableResult
    func stop() async -> Bool {
        guard process.isRunning else { return true }
        process.terminate()
        for _ in 0..<100 where process.isRunning { try? await Task.sleep(nanoseconds: 100_000_000) }
        let exited = !process.isRunning
        if !exited { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return exited
    }

    private func api(_ path: String) async throws -> [String: Any] {
        let (_, body) = try await Self.get("http://127.0.0.1:\(port)\(path)")
        return try JSONSerialization.jsonObject(with: body) as? [String: Any] ?? [:]
    }

    /// A query parameter's value with everything but letters and digits percent-encoded (a `+` left as it is would
    /// reach Prometheus as a space).
    static func encoded(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value
    }

    /// `GET url`: the status and the body.
    static func get(_ url: String) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 10
        let (body, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, body)
    }

    /// Runs `program arguments…` with `input` (a file) on its standard input, at most `timeout` seconds; returns its
    /// exit status and what it printed (both streams).
    static func tool(_ program: String, _ arguments: [String], input: String? = nil, timeout: Double = 30) async throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        if let input { process.standardInput = FileHandle(forReadingAtPath: input) }
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, String(decoding: (try? Data(contentsOf: output)) ?? Data(), as: UTF8.self))
    }
}
