import Foundation
import Testing

/// Prometheus and Grafana as users run them: Debian's Prometheus scrapes a running `chaos run --metrics` every second;
/// the exposition passes `promtool check metrics`, deploy/prometheus/chaos-rules.yaml passes `promtool check rules` and
/// evaluates without error, and every query of the Grafana dashboard deploy/grafana/chaos-fleet.json (its variables
/// filled in as Grafana would) returns a number from the scraped chaos. Without Debian's prometheus the test fails,
/// naming `make deps`.
@Suite("Prometheus scrapes a running chaos: exposition, rules and every Grafana query", .timeLimit(.minutes(3)))
struct PrometheusScrapeTests {
    static let dashboard = ChaosCLI.packageRoot.appendingPathComponent("deploy/grafana/chaos-fleet.json").path
    static let rules = ChaosCLI.packageRoot.appendingPathComponent("deploy/prometheus/chaos-rules.yaml").path

    /// Every panel's queries (`targets[].expr`), rows' panels included.
    static func panelQueries() throws -> [(panel: String, expr: String)] {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dashboard))) as? [String: Any] ?? [:]
        func walk(_ panels: [[String: Any]]) -> [(String, String)] {
            panels.flatMap { panel -> [(String, String)] in
                let title = panel["title"] as? String ?? "?"
                let own = (panel["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String }.map { (title, $0) }
                return own + walk(panel["panels"] as? [[String: Any]] ?? [])
            }
        }
        return walk(json["panels"] as? [[String: Any]] ?? [])
    }

    /// A query as Grafana sends it: `$instance` (the agent variable) is the scraped chaos, `$__rate_interval` four
    /// scrape intervals and more (Grafana's rule: at least 4 × the scrape interval).
    static func filledIn(_ expr: String, instance: String) -> String {
        expr.replacingOccurrences(of: "$__rate_interval", with: "10s").replacingOccurrences(of: "$instance", with: instance)
    }

    @Test(
        "a real Prometheus scrapes chaos run --metrics every second: promtool passes the exposition and the rules, every dashboard query and recording rule returns a number, the agent variable lists the chaos, and nothing is left running"
    )
    func everyDashboardQueryReturnsData() async throws {
        let tools = try PrometheusServer.tools()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("prometheus-scrape-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let (rulesStatus, rulesOutput) = try await PrometheusServer.tool(tools.promtool, ["check", "rules", Self.rules])
        #expect(rulesStatus == 0, "promtool check rules: \(rulesOutput)")
        let queries = try Self.panelQueries()
        #expect(queries.count >= 12, "the dashboard's queries: \(queries.map { $0.expr })")

        // The demo pair through disconnects, a latency that lasts most of the run and a slice: faults of three kinds
        // that touch connections, recoveries to measure, messages in transit.
        let api = ChaosCLI.freePort()
        let scenario = try ChaosCLI.scenarioFile(
            DemoPairScenario.text(
                name: "prometheus-scrape",
                duration: "60s",
                clients: 2,
                faults: [
                    "disconnect: {every: 2s..3s, mode: reset}",
                    "latency: {at: 1s, for: 50s, add: 30ms, direction: downstream}",
                    "slice: {at: 3s, for: 2s, size: 7}",
                ]
            )
        )
        let prometheus = try PrometheusServer.start(tools, scraping: "127.0.0.1:\(api)", rules: [Self.rules], in: folder)
        let chaos = Process()
        chaos.executableURL = URL(fileURLWithPath: ChaosCLI.executable)
        chaos.arguments = ["run", scenario, "--out", "\(folder)/run", "--metrics", "127.0.0.1:\(api)"]
        chaos.currentDirectoryURL = ChaosCLI.packageRoot
        _ = FileManager.default.createFile(atPath: "\(folder)/chaos.log", contents: nil)
        let chaosLog = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(folder)/chaos.log"))
        chaos.standardOutput = chaosLog
        chaos.standardError = chaosLog
        try chaos.run()
        defer {
            // A failed expectation below must not leave either running: chaos stops its pair on SIGINT.
            Self.stopBlocking(chaos, with: SIGINT, within: 40)
            Self.stopBlocking(prometheus.process, with: SIGTERM, within: 10)
            try? chaosLog.close()
        }
        let started = Date()
        #expect(try await prometheus.waitUntilReady(within: 30), "Prometheus ready on \(prometheus.port): \(folder)/prometheus.log")

        // Scraped, and the audit has measured a recovery.
        var scraped = false
        while !scraped, chaos.isRunning, Date().timeIntervalSince(started) < 60 {
            scraped = try await !(prometheus.query("chaos_audit_reconnect_seconds_count > 0") ?? []).isEmpty
            if !scraped { try await Task.sleep(nanoseconds: 500_000_000) }
        }
        try #require(scraped, "Prometheus scraped a reconnect from chaos within 60 s (\(folder)/chaos.log, prometheus.log)")

        // The exposition as Prometheus reads it passes promtool's lint, and carries the families the dashboard reads.
        let (_, body) = try await PrometheusServer.get("http://127.0.0.1:\(api)/metrics")
        try body.write(to: URL(fileURLWithPath: "\(folder)/metrics.txt"))
        let (lintStatus, lint) = try await PrometheusServer.tool(tools.promtool, ["check", "metrics"], input: "\(folder)/metrics.txt")
        #expect(lintStatus == 0 && lint.isEmpty, "promtool check metrics: \(lint)")
        let exposition = String(decoding: body, as: UTF8.self)
        for family in [
            #"chaos_fault_occurrences_total{kind="disconnect"}"#, #"chaos_fault_connections_touched_total{kind="latency"}"#,
            #"chaos_faults_active{kind="latency"} 1"#, "process_resident_memory_bytes ", "chaos_audit_transit_seconds_bucket{le=",
        ] {
            #expect(exposition.contains(family), "\(family) in /metrics")
        }

        // Every dashboard query, as Grafana fills it in, returns at least one number (Prometheus's NaN, an empty
        // histogram's quantile, counts as none) while the run goes on; so does every recording rule.
        let instance = "127.0.0.1:\(api)"
        var pending = queries.map { ($0.panel, Self.filledIn($0.expr, instance: instance)) }
        pending += ["instance:chaos_audit_resume_seconds:p99", "instance:chaos_audit_reconnect_seconds:p99"].map { ("rule", $0) }
        for (_, expr) in pending { #expect(!expr.contains("$"), "a dashboard variable left unfilled: \(expr)") }
        var answers: [String: String] = [:]
        while !pending.isEmpty, chaos.isRunning, Date().timeIntervalSince(started) < 90 {
            var still: [(String, String)] = []
            for (panel, expr) in pending {
                let samples = try await prometheus.query(expr)
                answers[expr] = samples.map { found in "\(found.map { $0.value })" } ?? "query failed"
                if !(samples ?? []).contains(where: { $0.value.isFinite }) { still.append((panel, expr)) }
            }
            pending = still
            if !pending.isEmpty { try await Task.sleep(nanoseconds: 1_000_000_000) }
        }
        for (panel, expr) in pending { Issue.record("\(panel): no number from \(expr) (last answer: \(answers[expr] ?? "none"))") }
        let agents = try await prometheus.labelValues("instance", match: "chaos_connections_live")
        #expect(agents == [instance], "the agent variable, label_values(chaos_connections_live, instance): \(agents)")
        let touched = try await prometheus.query(#"sum(chaos_fault_connections_touched_total{kind="disconnect"})"#) ?? []
        #expect((touched.first?.value ?? 0) >= 2, "disconnects touched the pair's connections: \(touched)")
        // The alerts and recording rules evaluated against chaos's series without an error.
        let evaluated = try await prometheus.rules()
        #expect(evaluated.count == 6, "\(evaluated.count) rules loaded")
        for rule in evaluated {
            #expect(rule["health"] as? String == "ok", "rule \(rule["name"] ?? "?"): \(rule["health"] ?? "?") \(rule["lastError"] ?? "")")
        }
        #expect(chaos.isRunning, "the run was still going when the queries were done (\(Date().timeIntervalSince(started)) s)")

        // Ctrl-C ends the run with its report; Prometheus stops on SIGTERM; neither leaves a process behind.
        kill(chaos.processIdentifier, SIGINT)
        for _ in 0..<400 where chaos.isRunning { try await Task.sleep(nanoseconds: 100_000_000) }
        #expect(!chaos.isRunning, "chaos stopped within 40 s of SIGINT")
        let stoppedByItself = await prometheus.stop()
        #expect(stoppedByItself, "Prometheus stopped within 10 s of SIGTERM")
        chaos.waitUntilExit()
        #expect([0, 1].contains(chaos.terminationStatus), "chaos run exit \(chaos.terminationStatus): \(folder)/chaos.log")
        #expect(FileManager.default.fileExists(atPath: "\(folder)/run/report.json"), "the interrupted run wrote its report")
        #expect(PairProcesses.alive(mentioning: folder).isEmpty, "processes left running: \(PairProcesses.alive(mentioning: folder))")
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Sends `signal` to `process` and waits for it at most `seconds`, then kills it (after a failed expectation).
    static func stopBlocking(_ process: Process, with signal: Int32, within seconds: Double) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
