import Foundation
import Testing

/// The live page (`chaos run --ui HOST:PORT`, `/ui`) opened in Debian's headless Chromium as a person opens it, driven
/// over the DevTools protocol (Tests/Fixtures/browser/cdp_driver.py): its figures arrive pushed, its buttons pause and
/// resume the fault schedule, its figures equal `/metrics` and the final report, and the pause is in timeline.json
/// and the report. Screenshots are kept in .build/test-artifacts/.
@Suite("The live page in headless Chromium", .serialized, .timeLimit(.minutes(3)))
struct LivePageTests {
    static let driver = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/browser/cdp_driver.py").path
    static let browser = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let artifacts = ChaosCLI.packageRoot.appendingPathComponent(".build/test-artifacts").path

    /// Drives the browser through `steps`; the values the steps read, or the driver's error as a failed expectation.
    static func drive(_ steps: [[String: Any]], folder: String, timeout: Double = 120) async throws -> [String: Any] {
        let stepsFile = "\(folder)/steps-\(UUID().uuidString).json"
        try JSONSerialization.data(withJSONObject: steps).write(to: URL(fileURLWithPath: stepsFile))
        let result = try await ChaosCLI.run(
            ["python3", Self.driver, "--chromium", try #require(Self.browser), "--steps", stepsFile],
            timeout: timeout,
            program: "/usr/bin/env"
        )
        let answer = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any] ?? [:]
        #expect(
            answer["ok"] as? Bool == true,
            "the browser: \(answer["error"] ?? "status \(result.status): \(result.stdout.suffix(400)) \(result.stderr.suffix(800))") (\(folder))"
        )
        return answer["values"] as? [String: Any] ?? [:]
    }

    /// A figure as the page shows it (`12,345`), as a number.
    static func figure(_ id: String) -> String {
        "Number(document.getElementById('\(id)').textContent.replace(/,/g, ''))"
    }

    /// Waits for the control API on `port` (the run's pair comes up first).
    static func waitForAPI(_ port: Int) async throws {
        for _ in 0..<300 where !TCPPort.accepts(port) { try await Task.sleep(nanoseconds: 100_000_000) }
        #expect(TCPPort.accepts(port), "the control API on \(port) never listened")
    }

    @Test(
        "a running scenario's page shows pushed figures, pauses and resumes the schedule from its buttons, equals /metrics and the final report; the pause is in timeline.json and the report",
        .enabled(if: browser != nil, "needs Debian's chromium (make deps installs it)")
    )
    func watchAndSteer() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-page-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: Self.artifacts, withIntermediateDirectories: true)
        var checks = TLSCaptureAuditTests.Checks(folder: folder)
        let api = ChaosCLI.freePort()
        // The clients send for 11 s and stay: from then on the figures hold still, and the page's last equal the end's.
        let file = try ChaosCLI.scenarioFile(
            DemoPairScenario.text(
                name: "live-page",
                duration: "24s",
                serverFlags: "--rate 20 --send-for 11s",
                clientFlags: "--rate 20 --send-for 11s",
                clients: 2,
                faults: [
                    // The last two after the pair's production (11 s), however late the page comes up and pauses the
                    // schedule (fresh-clone run s63q1, beside eleven other lanes: paused at 10.3 s, every occurrence
                    // then behind it, none after the pause); they begin before the run's end (24 s) for a pause of up
                    // to 11 s.
                    "disconnect: {at: 2s, mode: reset}", "latency: {at: 5s, for: 2s, add: 100ms}", "disconnect: {at: 12s, mode: reset}",
                    "partition: {at: 13s, for: 1s, direction: both}",
                ]
            )
        )
        async let run = ChaosCLI.run(["run", file, "--ui", "127.0.0.1:\(api)", "--out", "\(folder)/run"], timeout: 150)
        try await Self.waitForAPI(api)
        let values = try await Self.drive(
            [
                ["navigate": "http://127.0.0.1:\(api)/ui"],
                // Paused as soon as the page shows the run; its figures come in while the schedule waits.
                ["wait": "\(Self.figure("updates")) >= 1", "timeout": 30],
                ["eval": "document.getElementById('scenario').textContent", "as": "scenario"],
                ["click": "#pause"],
                ["wait": "document.getElementById('control-answer').textContent.includes('200')", "timeout": 10],
                ["wait": "!document.getElementById('paused').hidden", "timeout": 10],
                ["eval": "document.querySelector('#next-faults tbody').textContent", "as": "nextWhilePaused"],
                ["wait": "\(Self.figure("updates")) >= 2 && \(Self.figure("ok")) > 0", "timeout": 30],
                ["screenshot": "\(Self.artifacts)/live-page-paused.png"],
                ["sleep": 3],
                ["click": "#resume"],
                ["wait": "document.getElementById('control-answer').textContent.includes('paused_for_s')", "timeout": 10],
                ["type": "#stream-search", "text": "c2"],
                ["wait": "document.getElementById('stream-page').textContent.includes('(2)')", "timeout": 10],
                [
                    "eval": "[...document.querySelectorAll('#streams tbody tr td:first-child')].map(td => td.textContent)",
                    "as": "searched",
                ],
                // The pair has been quiet since 11 s: the figures hold still.
                ["wait": "Number(document.getElementById('elapsed').textContent) >= 17", "timeout": 40],
                ["sleep": 1.5],
                [
                    "eval": "({sent: \(Self.figure("sent")), delivered: \(Self.figure("delivered")), ok: \(Self.figure("ok")), "
                        + "lost: \(Self.figure("lost")), duplicated: \(Self.figure("duplicated")), "
                        + "applied: \(Self.figure("faults-applied")), manual: document.getElementById('manual').textContent})",
                    "as": "page",
                ],
                ["eval": "fetch('/metrics').then(r => r.text())", "as": "metrics"],
                ["screenshot": "\(Self.artifacts)/live-page.png"],
            ],
            folder: folder
        )
        let result = try await run
        checks.expect(result.status == 0, "the run passes: \(result.stdout.suffix(1500))")
        checks.expect(result.stdout.contains("live page: http://127.0.0.1:\(api)/ui"), "the run prints the page's address")
        checks.expect(values["scenario"] as? String == "live-page", "\(values["scenario"] ?? "nothing")")
        checks.expect((values["nextWhilePaused"] as? String)?.contains("after the pause") == true, "\(values["nextWhilePaused"] ?? "")")
        let searched = values["searched"] as? [String] ?? []
        checks.expect(searched.count == 2 && searched.allSatisfy { $0.contains("c2") }, "search c2: \(searched)")
        let page = values["page"] as? [String: Any] ?? [:]
        // The page against /metrics at the same moment.
        let metrics = values["metrics"] as? String ?? ""
        for (name, label) in [("ok", "ok"), ("lost", "lost"), ("duplicated", "duplicated"), ("sent", "sent")] {
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("chaos_audit_messages{class=\"\(label)\"} ") }
            let value = line.flatMap { Int($0.split(separator: " ").last ?? "") }
            checks.expect(
                value != nil && value == (page[name] as? NSNumber)?.intValue,
                "\(name): page \(page[name] ?? "?") vs /metrics \(line ?? "none")"
            )
        }
        // The page's last figures against the final report.
        let report = try DeliveredMeansAcknowledgedTests.reportJSON("\(folder)/run")
        let totals = report["totals"] as? [String: Any] ?? [:]
        checks.expect((totals["ok"] as? Int ?? 0) > 100, "messages were audited: \(totals)")
        for name in ["sent", "delivered", "ok", "lost", "duplicated"] {
            checks.expect(
                totals[name] as? Int == (page[name] as? NSNumber)?.intValue,
                "\(name): page \(page[name] ?? "?") vs report \(totals[name] ?? "?")"
            )
        }
        // The pause: in the report's manual actions and in timeline.json, and the occurrences after it begin later.
        let manual = (report["manual"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
        checks.expect(manual == ["pause", "resume"], "report.manual: \(report["manual"] ?? "none")")
        checks.expect((page["manual"] as? String)?.contains("resume") == true, "the page lists the actions: \(page["manual"] ?? "")")
        let timeline =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(folder)/run/timeline.json"))) as? [String: Any] ?? [:]
        let pauses = timeline["pauses"] as? [[String: Any]] ?? []
        let lasts = Self.seconds(pauses.first?["for"])
        checks.expect(pauses.count == 1 && lasts >= 2.5, "timeline.json pauses: \(pauses)")
        let pausedAt = Self.seconds(pauses.first?["at"])
        let origin = Double((report["extra"] as? [String: String])?["timeline.origin_s"] ?? "0") ?? 0
        let planned = (timeline["occurrences"] as? [[String: Any]] ?? []).map { Self.seconds($0["at"]) }
        let reported = (report["faults"] as? [[String: Any]] ?? []).compactMap { $0["at_s"] as? Double }
        checks.expect(planned.count == 4 && reported.count == 4, "every occurrence ran: \(planned) \(reported)")
        for (at, atS) in zip(planned, reported) {
            let expected = origin + at + (at >= pausedAt ? lasts : 0)
            checks.expect(
                abs(atS - expected) < 0.002,
                "planned \(at) s, paused at \(pausedAt) s for \(lasts) s: reported \(atS) s, expected \(expected) s"
            )
        }
        checks.expect(planned.contains { $0 >= pausedAt }, "a fault came after the pause: \(planned), paused at \(pausedAt)")
        // chaos replay pauses where the run was paused: the same occurrences at the same times on the timeline's clock.
        let replay = try await ChaosCLI.run(["replay", "\(folder)/run", "--out", "\(folder)/replay"], timeout: 120)
        let replayed = try DeliveredMeansAcknowledgedTests.reportJSON("\(folder)/replay")
        let replayOrigin = Double((replayed["extra"] as? [String: String])?["timeline.origin_s"] ?? "0") ?? 0
        let again = (replayed["faults"] as? [[String: Any]] ?? []).compactMap { $0["at_s"] as? Double }.map { $0 - replayOrigin }
        checks.expect(
            replay.status == 0 && again.count == reported.count && zip(again, reported.map { $0 - origin }).allSatisfy { abs($0 - $1) < 0.002 },
            "the replay's occurrences \(again) vs the run's \(reported.map { $0 - origin }) (status \(replay.status))"
        )
        checks.removeIfPassed()
    }

    /// A duration as timeline.json writes it (`"1.5s"`, `"250ms"`, `"3041234567ns"`, `"2m"`), in seconds.
    static func seconds(_ value: Any?) -> Double {
        guard let text = value as? String else { return -1 }
        for (suffix, unit) in [("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] where text.hasSuffix(suffix) {
            return (Double(text.dropLast(suffix.count)) ?? -1e9) * unit
        }
        return -1
    }

    @Test(
        "behind a token, the page itself loads but its figures and controls answer 401 without the token; given #token= it shows the run and stops it",
        .enabled(if: browser != nil, "needs Debian's chromium (make deps installs it)")
    )
    func tokenRule() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("live-token-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var checks = TLSCaptureAuditTests.Checks(folder: folder)
        let token = "live-page-token-\(UUID().uuidString)"
        try (token + "\n").write(toFile: "\(folder)/token", atomically: true, encoding: .utf8)
        let api = ChaosCLI.freePort()
        let file = try ChaosCLI.scenarioFile(
            DemoPairScenario.text(name: "live-token", duration: "60s", faults: ["disconnect: {at: 2s, mode: reset}"])
        )
        async let run = ChaosCLI.run(
            ["run", file, "--ui", "127.0.0.1:\(api)", "--api-token-file", "\(folder)/token", "--out", "\(folder)/run"],
            timeout: 120
        )
        try await Self.waitForAPI(api)
        let status = { (method: String, path: String) in "fetch('\(path)', {method: '\(method)'}).then(r => r.status)" }
        let values = try await Self.drive(
            [
                ["navigate": "http://127.0.0.1:\(api)/ui"],
                ["wait": "!document.getElementById('token-form').hidden", "timeout": 15],
                ["eval": status("GET", "/ui/state"), "as": "state"],
                ["eval": status("GET", "/ui/streams"), "as": "streams"],
                ["eval": status("POST", "/schedule/pause"), "as": "pause"],
                ["eval": status("POST", "/faults"), "as": "fault"],
                ["eval": status("POST", "/stop"), "as": "stop"],
                ["navigate": "http://127.0.0.1:\(api)/ui#token=\(token)"],
                ["wait": "\(Self.figure("updates")) >= 1", "timeout": 15],
                [
                    "eval":
                        "fetch('/stop', {method: 'POST', headers: {Authorization: 'Bearer \(token)'}}).then(r => r.status)",
                    "as": "stopWithToken",
                ],
            ],
            folder: folder
        )
        for name in ["state", "streams", "pause", "fault", "stop"] {
            checks.expect((values[name] as? NSNumber)?.intValue == 401, "\(name) without the token: \(values[name] ?? "?")")
        }
        checks.expect((values["stopWithToken"] as? NSNumber)?.intValue == 202, "stop with the token: \(values["stopWithToken"] ?? "?")")
        let result = try await run
        // Stopped long before its 60 s, as Ctrl-C stops it: the report says so.
        let report = try DeliveredMeansAcknowledgedTests.reportJSON("\(folder)/run")
        let elapsed = report["elapsed_s"] as? Double ?? 99
        let extra = report["extra"] as? [String: String] ?? [:]
        checks.expect(elapsed < 60, "the run stopped early: \(elapsed) s, status \(result.status)")
        checks.expect(extra["interrupted"]?.contains("POST /stop") == true, "report.extra.interrupted: \(extra)")
        checks.expect(((report["manual"] as? [[String: Any]])?.last?["action"] as? String) == "stop", "\(report["manual"] ?? "none")")
        checks.removeIfPassed()
    }
}
