import Foundation
import Testing

let badScenarios = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/bad-scenarios")

@Suite("chaos validate and bad input, as a user runs them")
struct ValidateCommandTests {
    static var badFiles: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: badScenarios.path)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
    }

    @Test("every bad scenario exits 2 with file:line:column and never crashes", arguments: badFiles)
    func badScenarioExitsTwo(name: String) async throws {
        let path = "Tests/Fixtures/bad-scenarios/\(name)"
        let header = try String(contentsOfFile: ChaosCLI.packageRoot.appendingPathComponent(path).path, encoding: .utf8)
            .split(separator: "\n")[0].dropFirst("# expect: ".count)
        let location = header.split(separator: " ")[0]
        let result = try await ChaosCLI.run(["validate", path])
        #expect(result.status == 2, "exit \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(path):\(location): error:"), "stderr: \(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test("chaos run refuses a bad scenario the same way, starting nothing")
    func runRefusesBadScenario() async throws {
        let result = try await ChaosCLI.run(["run", "Tests/Fixtures/bad-scenarios/typo-key.yaml"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("typo-key.yaml:10:18: error: unknown key 'evry'"))
        #expect(!result.stdout.contains("listening"))
    }

    @Test(
        "a missing file, a bad flag and a bad --set value exit 2 with a clear message",
        arguments: [
            (["validate", "no/such/file.yaml"], "cannot read scenario file"),
            (["validate", "Scenarios/quickstart.yaml", "--seed", "banana"], "seed"),
            (["validate", "Scenarios/quickstart.yaml", "--duration", "forever"], "--duration must be a duration"),
            (["validate", "Scenarios/quickstart.yaml", "--duration", "2000000h"], "duration must be above 0 and at most 10 years"),
            (["run", "Scenarios/quickstart.yaml", "--set", "duration=2000000h"], "duration must be above 0 and at most 10 years"),
            (["validate", "Scenarios/quickstart.yaml", "--set", "proxies.nope.listen=1.2.3.4:5"], "no proxy named 'nope'"),
            (
                ["validate", "Scenarios/quickstart.yaml", "--set", "proxies.stream.tls={upstream: no/roots.pem}"],
                "--set proxies.stream.tls:1:12: error: tls.upstream must be verify, insecure, cleartext or a PEM file of roots; cannot read 'no/roots.pem'"
            ),
            (["validate", "Scenarios/quickstart.yaml", "--set", "proxies.stream.tls={verify: true}"], "unknown key 'verify' in tls"),
            (
                ["proxy", "--listen", "127.0.0.1:1", "--upstream", "127.0.0.1:2", "--tls-upstream", "no/roots.pem"],
                "chaos: error: --tls-upstream must be"
            ),
            (
                ["proxy", "--listen", "127.0.0.1:1", "--upstream", "127.0.0.1:2", "--tls-server-name", "a b"],
                "chaos: error: --tls-server-name must be a host name or an IP address, found 'a b'"
            ),
            (
                ["proxy", "--listen", "127.0.0.1:1", "--upstream", "127.0.0.1:2", "--tls-client-cert", "c.pem"],
                "--tls-client-cert and --tls-client-key go together"
            ),
            (["proxy", "--listen", "nowhere", "--upstream", "127.0.0.1:1"], "--listen must be HOST:PORT"),
            (["proxy", "--listen", "127.0.0.1:1", "--upstream", "127.0.0.1:2", "--busy-poll", "5s"], "--busy-poll must be a duration up to 10ms"),
            (["run", "Scenarios/quickstart.yaml", "--busy-poll", "banana"], "--busy-poll must be a duration up to 10ms"),
            (["frobnicate"], "Unexpected argument"),
        ]
    )
    func badFlags(arguments: [String], fragment: String) async throws {
        let result = try await ChaosCLI.run(arguments)
        #expect(result.status == 2, "exit \(result.status): \(result.stderr)")
        #expect(result.stderr.contains(fragment), "stderr: \(result.stderr)")
    }

    @Test("--set proxies.NAME.tls replaces a proxy's tls block as a scenario writes it, or ends it (off): a handshake fault then has no TLS proxy")
    func setTLS() async throws {
        let scenario = FileManager.default.temporaryDirectory.appendingPathComponent("set-tls-\(UUID().uuidString).yaml").path
        try """
        name: set-tls
        duration: 10s
        proxies:
          - {name: api, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001", tls: {upstream: verify}}
        faults:
          - handshake: {at: 2s, for: 1s, mode: fail}
        """.write(toFile: scenario, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: scenario) }
        let with = try await ChaosCLI.run(["validate", scenario, "--set", "proxies.api.tls={upstream: insecure, alpn: [h2]}"])
        #expect(with.status == 0, "\(with.stderr)")
        #expect(with.stdout.contains("handshake") && with.stdout.contains("mode=fail"), "\(with.stdout)")
        let off = try await ChaosCLI.run(["validate", scenario, "--set", "proxies.api.tls=off"])
        #expect(
            off.status == 2 && off.stderr.contains("faults[0]: a handshake fault acts on TLS handshakes, but no proxy it reaches has a tls: block"),
            "\(off.stderr)"
        )
    }

    @Test("validate prints the same timeline for the same seed and another for another seed")
    func timelineIsAFunctionOfTheSeed() async throws {
        let a = try await ChaosCLI.run(["validate", "Scenarios/quickstart.yaml", "--seed", "7"])
        let b = try await ChaosCLI.run(["validate", "Scenarios/quickstart.yaml", "--seed", "7"])
        let c = try await ChaosCLI.run(["validate", "Scenarios/quickstart.yaml", "--seed", "8"])
        #expect(a.status == 0, "\(a.stderr)")
        #expect(a.stdout == b.stdout)
        #expect(a.stdout != c.stdout)
        #expect(a.stdout.contains("disconnect"))
    }

    @Test("ten years with a fault every millisecond validates in 400 MB of address space: a count formula and the first occurrences")
    func tenYearsEveryMillisecond() async throws {
        let scenario = try ChaosCLI.scenarioFile(
            """
            name: decade
            duration: 3650d
            seed: 5
            proxies:
              - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
            faults:
              - disconnect: {every: 1ms..2ms}
              - latency: {every: 1ms, for: 1ms, add: 5ms}
            """
        )
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("decade-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: output) }
        // The eager timeline needed tens of GiB here; the limit makes any such regression fail fast.
        let command = "ulimit -v 400000; exec '\(ChaosCLI.executable)' validate '\(scenario)' --show 5 > '\(output.path)' 2>&1"
        let status = try await ChaosCLI.shell(command, timeout: 60)
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(text)")
        #expect(text.contains("timeline: about "), "\(text)")
        #expect(text.contains("rule 0 (disconnect): (87600h − 0s) / every 1ms..2ms"), "\(text)")
        #expect(text.contains("… the first 5 shown"), "\(text)")
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("  00:00:00.") }.count == 5, "\(text)")
    }
}
