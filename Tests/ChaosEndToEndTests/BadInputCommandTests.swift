import Foundation
import Testing

/// Bad or hostile input on the command line: exit 2 with a clear message and nothing created, or, where the
/// input is legal, the right thing done.
@Suite("chaos run with bad or hostile command-line input", .timeLimit(.minutes(5)))
struct BadInputCommandTests {
    @Test("--set name= (empty) is exit 2 naming the key, and no run folder is created")
    func emptyName() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("empty-name-\(UUID().uuidString)").path
        let result = try await ChaosCLI.run(["run", "Scenarios/quickstart.yaml", "--set", "name=", "--out", folder])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--set name"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    @Test(
        "the control API off loopback without a token, a short token, --metrics-open without one, bad fleet flags: exit 2 naming the flag, nothing started",
        arguments: [
            (["proxy", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--api", "0.0.0.0:0"], "needs --api-token-file"),
            (
                ["proxy", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--api", "0.0.0.0:0", "--api-token-file", "Scenarios"],
                "--api-token-file Scenarios"
            ),
            (["run", "Scenarios/quickstart.yaml", "--metrics", "127.0.0.1:0", "--metrics-open"], "--metrics-open goes with"),
            (["run", "Scenarios/quickstart.yaml", "--agent", "a/b"], "--agent must be"),
            (["run", "Scenarios/quickstart.yaml", "--agent", "a", "--start-at", "noon"], "--start-at must be an RFC 3339"),
            (["run", "Scenarios/quickstart.yaml", "--start-at", "2026-11-27T12:00:00Z"], "add --agent NAME"),
            (["run", "Scenarios/quickstart.yaml", "--agent", "a", "--event-ring", "1KB"], "--event-ring must be"),
            (["demo", "client", "--connect", "127.0.0.1:1", "--send-until", "noon"], "--send-until expects an RFC 3339 time"),
            (
                ["demo", "server", "--listen", "127.0.0.1:0", "--transport", "grpc", "--send-until", "2026-11-27T12:00:00Z"],
                "--send-until works with --transport tcp or websocket"
            ),
            (["report", "--merge"], "--merge"),
            (["report", "Reports/x", "--merge", "Reports/y"], "not both"),
            (["proxy", "--listen", "udp://127.0.0.1:0", "--upstream", "127.0.0.1:1"], "--listen is udp but --upstream is tcp"),
            (["proxy", "--listen", "quic://127.0.0.1:0", "--upstream", "127.0.0.1:1"], "--listen must be HOST:PORT or udp://HOST:PORT"),
            (["proxy", "--listen", "udp://127.0.0.1:0", "--upstream", "udp://127.0.0.1:1", "--tls"], "a udp:// proxy carries no TLS"),
        ]
    )
    func accessAndFleetFlags(arguments: [String], message: String) async throws {
        let result = try await ChaosCLI.run(arguments, timeout: 20)
        #expect(result.status == 2 && result.stderr.contains(message), "\(arguments): \(result.status) \(result.stderr)")
    }

    @Test(
        "--set meets the scenario file's rules (one rule set for every road): each break is exit 2 naming the field",
        arguments: [
            ("proxies.stream.upstream=127.0.0.1:0", "upstream"), ("proxies.stream.upstream=127.0.0.1:7000", "upstream"),
            ("pair.server.run=x {nope}", "placeholder"),
        ]
    )
    func setMeetsTheFileRules(setting: String, field: String) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bad-set-\(UUID().uuidString)").path
        let result = try await ChaosCLI.run(["run", "Scenarios/quickstart.yaml", "--set", setting, "--out", folder])
        #expect(result.status == 2, "\(setting): exit \(result.status)\n\(result.stderr)")
        #expect(result.stderr.contains("--set") && result.stderr.contains(field), "\(setting): \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    @Test("kill -9 in the middle of a run leaves a report.json checkpoint that chaos report reads")
    func killNineLeavesACheckpoint() async throws {
        let run = try await RunFolderUnderTest.run(
            [RunCommandTests.resilient, "--duration", "60s"],
            signal: (after: 5, number: SIGKILL),
            signalOnceCheckpointed: true
        )
        // The pair outlives a chaos killed with -9: stop what this run started.
        for pid in PairProcesses.alive(mentioning: run.folder.path) { kill(pid, SIGKILL) }
        #expect(run.result.status != 0)
        let report = try run.report()
        #expect(report.schema == "chaos.report/1")
        #expect(report.complete == false, "a checkpoint, not a finished report")
        let rendered = try await ChaosCLI.run(["report", run.folder.path, "--format", "markdown"])
        #expect(rendered.status == 0, "\(rendered.stderr)")
        #expect(rendered.stdout.contains("resilient-short"))
        run.remove()
    }

    @Test("a run folder whose path holds spaces, quotes and $(…) is passed to the pair as one word, never run by the shell")
    func placeholdersAreQuoted() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("quoting-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        let marker = base.appendingPathComponent("pwned").path
        let folder = base.appendingPathComponent("run it's $(touch \(marker))").path
        let listen = ChaosCLI.freePort()
        let upstream = ChaosCLI.freePort()
        let scenario = try ChaosCLI.scenarioFile(
            """
            name: quoting
            duration: 2s
            proxies:
              - {name: stream, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
            pair:
              server:
                run: chaos demo server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl
                ready: tcp 127.0.0.1:{upstream.port}
            """
        )
        let result = try await ChaosCLI.run(["run", scenario, "--out", folder], timeout: 60)
        // No client went through the proxy: inconclusive (exit 1), not an error.
        #expect(result.status == 1 && result.stdout.contains("verdict: INCONCLUSIVE"), "\(result.stdout)\n\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: folder + "/server.jsonl"), "the log went into the run folder")
        #expect(!FileManager.default.fileExists(atPath: marker), "the shell ran a command from a path")
    }

    @Test(
        "chaos audit --keylog: a malformed key log line is exit 2 at file:line:column; a key log without the capture's keys is an ERROR verdict, exit 2, naming the client random"
    )
    func keylogs() async throws {
        let fixtures = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/captures/tls").path
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("keylog-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        try "# keys\nCLIENT_RANDOM zz00 0011\n".write(toFile: "\(base)/bad.keys", atomically: true, encoding: .utf8)
        let bad = try await ChaosCLI.run(["audit", "\(fixtures)/tls13-chacha20.pcap", "--keylog", "\(base)/bad.keys", "--out", "\(base)/bad"])
        #expect(bad.status == 2 && bad.stderr.contains("key log \(base)/bad.keys:2:15: the client random is not hex"), "\(bad.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(base)/bad"))
        let other = try await ChaosCLI.run([
            "audit", "\(fixtures)/tls13-chacha20.pcap", "--keylog", "\(fixtures)/tls12-chacha20.keys",
            "--out", "\(base)/other",
        ])
        #expect(other.status == 2 && other.stdout.contains("verdict: ERROR (1 of 1 TLS conversation(s) could not be decrypted"), "\(other.stdout)")
        let report = try String(contentsOfFile: "\(base)/other/report.md", encoding: .utf8)
        #expect(report.contains("no keys for client random"), "\(report.prefix(2_000))")
        let good = try await ChaosCLI.run([
            "audit", "\(fixtures)/tls13-chacha20.pcap", "--keylog", "\(fixtures)/tls13-chacha20.keys",
            "--out", "\(base)/good",
        ])
        #expect(good.status == 0 && good.stdout.contains("TLS: 1 of 1 conversation(s) decrypted") && good.stdout.contains("100 ok"), "\(good.stdout)")
    }

    @Test(
        "chaos audit's gRPC flags: a field no RPC has, a descriptor set that is not one, --method without grpc, are exit 2 naming the mistake",
        arguments: [
            (
                ["--framing", "grpc", "--descriptors", "Tests/Fixtures/protos/follow.protoset", "--seq", "sequence"],
                "'sequence' in the request of /follow.v1.Follow/"
            ),
            (
                ["--framing", "grpc", "--descriptors", "Tests/Fixtures/protos/follow.proto", "--seq", "sequence_id"],
                "not a FileDescriptorSet"
            ),
            (
                [
                    "--framing", "grpc", "--descriptors", "Tests/Fixtures/protos/follow.protoset", "--seq", "sequence_id",
                    "--method", "/follow.v1.Follow/Walk",
                ], "no audited RPC is in the descriptor set"
            ),
            (["--method", "/follow.v1.Follow/Race"], "--descriptors and --method are for --framing grpc"),
        ]
    )
    func grpcAuditFlags(flags: [String], message: String) async throws {
        let result = try await ChaosCLI.run(["audit", "never-read.pcap"] + flags)
        #expect(result.status == 2, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    @Test(
        "chaos audit's --framing comes from the protocol registry: a name it lacks lists its names, a plug-in's option out of range names the flag; exit 2",
        arguments: [
            (
                ["--framing", "amqp"],
                "--framing must be one of lines, length-prefixed, websocket, grpc, sse, mqtt, socketio, datagram, http3, auto, found 'amqp'"
            ),
            (["--framing", "length-prefixed", "--length-bytes", "3"], "--framing length-prefixed: --length-bytes must be 1, 2 or 4, found 3"),
            (["--framing", "datagram"], "framing datagram reads a udp:// proxy's datagrams; chaos audit reads TCP captures"),
        ]
    )
    func framingFlags(flags: [String], message: String) async throws {
        try await grpcAuditFlags(flags: flags, message: message)
    }
}
