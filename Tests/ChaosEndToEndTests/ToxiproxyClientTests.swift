import Foundation
import Testing

/// The real Toxiproxy client (PyPI's toxiproxy-python) against `chaos proxy --api`: each check of
/// `Tests/Fixtures/toxiproxy/drive.py` starts chaos as a child process, drives it through the client and raw
/// HTTP, and measures the toxic on real sockets on 127.0.0.1 (times against the same path without the toxic,
/// bandwidth as a ratio). `make deps` installs the client and `prometheus_client`.
@Suite("Toxiproxy drop-in, driven by toxiproxy-python", .serialized, .timeLimit(.minutes(5)))
struct ToxiproxyClientTests {
    static let fixtures = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/toxiproxy")

    /// Runs one check of the driver; returns its exit status and output.
    static func drive(_ check: String, timeout: Double = 90) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = ["python3", "drive.py", check]
                process.currentDirectoryURL = fixtures
                process.environment = ProcessInfo.processInfo.environment.merging(
                    ["CHAOS": ChaosCLI.executable, "PYTHONUNBUFFERED": "1"]) { $1 }
                let output = FileManager.default.temporaryDirectory.appendingPathComponent("toxi-\(UUID().uuidString)")
                _ = FileManager.default.createFile(atPath: output.path, contents: nil)
                defer { try? FileManager.default.removeItem(at: output) }
                do {
                    let handle = try FileHandle(forWritingTo: output)
                    process.standardOutput = handle
                    process.standardError = handle
                    try process.run()
                } catch {
                    return continuation.resume(throwing: error)
                }
                let deadline = Date().addingTimeInterval(timeout)
                while process.isRunning, Date() < deadline { usleep(20_000) }
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
                continuation.resume(
                    returning: (
                        process.terminationStatus,
                        (try? String(contentsOf: output, encoding: .utf8)) ?? ""
                    )
                )
            }
        }
    }

    @Test(
        "the client drives chaos as it drives Toxiproxy, and each toxic does what it says on real sockets",
        arguments: [
            "api",  // status codes, bodies, defaults, 404/409/400, /populate, /reset, /version, the client's exceptions
            "latency",  // the latency added, and gone when removed
            "bandwidth",  // the rate within 10 %
            "slicer",  // many small reads, nothing lost
            "timeout",  // 0 holds (released when removed); 500 closes after the timeout
            "reset_peer",  // ECONNRESET
            "limit_data",  // exactly the limit, then EOF
            "slow_close",  // the FIN late by the delay
            "disabled",  // FIN to open connections, ECONNREFUSED to new ones, enabled again
            "correct_tcp",  // a down upstream resets the client; a half-close is passed on
            "toxicity",  // drawn per connection, the same with the same seed
            "metrics",  // Prometheus text parses; a counter moves while the connection is open
            "faults",  // chaos's own POST /faults on the same port
            "config",  // --config FILE: Toxiproxy's config file
            "run_metrics",  // chaos run --metrics: live counters; an API toxic and fault land in report.json's faults
            "live_audit",  // chaos proxy --protocol-from --out: GET /report, audit metrics, report.json on exit
            "flag_audit",  // chaos proxy with chaos audit's protocol flags: GET /report
            "churn",  // toxics, updates, disable/enable and resets at random under traffic: chaos keeps answering
        ]
    )
    func check(_ name: String) async throws {
        let (status, output) = try await Self.drive(name)
        #expect(!output.contains("No module named"), "python3 lacks a module: run `make deps`\n\(output)")
        #expect(status == 0, "drive.py \(name) exited \(status):\n\(output)")
    }

    @Test(
        "a config file that is not Toxiproxy's exits 2 naming the file and what is wrong",
        arguments: [
            (#"{"name": "a"}"#, "not a Toxiproxy config"),
            (#"[{"name": "a", "listen": "127.0.0.1:0"}]"#, "missing required field: upstream at proxy 1"),
            (#"[{"name": "a", "listen": "here", "upstream": "127.0.0.1:1"}]"#, "listen must be HOST:PORT"),
            (#"[{"name": "a", "upstream": "127.0.0.1:1"}, {"name": "a", "upstream": "127.0.0.1:2"}]"#, "used twice"),
        ]
    )
    func badConfig(_ text: String, _ message: String) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("toxiproxy-\(UUID().uuidString).json")
        try text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await ChaosCLI.run(["proxy", "--config", file.path], timeout: 30)
        #expect(result.status == 2)
        #expect(result.stderr.contains(file.path) && result.stderr.contains(message), "\(result.stderr)")
    }
}
