import Foundation
import Testing

/// A run that judged nothing does not pass (PRODUCT §13): the quickstart's own pair with a client that bypasses the
/// proxy, or a `seq:` the messages lack, is `inconclusive` (exit 1) saying why; a client that stops for good after a
/// fault is a failure that says "never resumed" first, with its exit as context.
@Suite("No vacuous PASS: inconclusive runs and the finding first")
struct VacuousVerdictTests {
    static let resumable = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/resumable_pair.py").path

    /// The demo pair, one client; `connect` is where the client connects, `seq` where the audit reads the seq.
    static func demoScenario(connect: String, seq: String, ready: Bool) -> String {
        """
        name: vacuous
        duration: 3s
        proxies:
          - name: stream
            listen: 127.0.0.1:7000
            upstream: 127.0.0.1:7001
        pair:
          server:
            run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 20 --log {run_dir}/server.jsonl
            ready: tcp 127.0.0.1:{upstream.port}
            stop_grace: 2s
          client:
            run: chaos demo client --connect 127.0.0.1:\(connect) --stream c{index} --rate 20 --log {run_dir}/client-{index}.jsonl
            count: 1
        \(ready ? "    ready: connected" : "")
            stop_grace: 2s
        protocol:
          framing: lines
          format: json
          seq: \(seq)
          stream: stream
          ack: ack
          ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
        faults:
          - disconnect: {at: 1s, mode: reset}
        expect:
          lost: 0
          duplicated: 0
        """
    }

    static func reportJSON(_ run: RunFolderUnderTest) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: run.file("report.json")) as? [String: Any])
    }

    @Test("a client pointed at the server instead of the proxy: inconclusive, exit 1, the idle proxy named; the fault that touched nobody flagged")
    func clientBypassesTheProxy() async throws {
        let file = try ChaosCLI.scenarioFile(Self.demoScenario(connect: "{upstream.port}", seq: "seq", ready: false))
        let run = try await RunFolderUnderTest.run([file], timeout: 60)
        #expect(run.result.status == 1, "exit \(run.result.status): \(run.result.stdout)\n\(run.result.stderr)")
        #expect(
            run.result.stdout.contains("verdict: INCONCLUSIVE (no connection went through proxy 'stream' (listen 127.0.0.1:"),
            "\(run.result.stdout)"
        )
        let json = try Self.reportJSON(run)
        #expect(json["verdict"] as? String == "inconclusive")
        #expect((json["inconclusive"] as? [String])?.first?.hasPrefix("no connection went through proxy 'stream'") == true)
        #expect((json["connections"] as? [String: Any])?["opened"] as? Int == 0)
        let markdown = String(decoding: try run.file("report.md"), as: UTF8.self)
        #expect(markdown.contains("⚠ disconnect #0 touched no connection."), "\(markdown)")
        let junit = String(decoding: try run.file("junit.xml"), as: UTF8.self)
        #expect(junit.contains("type=\"inconclusive\""), "\(junit)")
        run.remove()
    }

    @Test("seq: sequence_id where the messages say seq: inconclusive, naming how many messages had no seq, the first one and its keys")
    func seqKeyTheMessagesLack() async throws {
        let file = try ChaosCLI.scenarioFile(Self.demoScenario(connect: "{listen.port}", seq: "sequence_id", ready: true))
        let run = try await RunFolderUnderTest.run([file], timeout: 60)
        #expect(run.result.status == 1, "exit \(run.result.status): \(run.result.stdout)\n\(run.result.stderr)")
        let json = try Self.reportJSON(run)
        #expect(json["verdict"] as? String == "inconclusive")
        let reason = json["verdict_reason"] as? String ?? ""
        #expect(reason.contains("went through chaos but no message was audited: "), "\(reason)")
        #expect(reason.contains("messages without a seq; first: the message ending at byte "), "\(reason)")
        #expect(reason.contains("(no `sequence_id`; its keys: ") && reason.contains("seq"), "\(reason)")
        let relayed = (json["extra"] as? [String: String])?["proxy.stream.bytes_upstream"].flatMap(Int.init) ?? 0
        #expect(relayed > 0, "bytes flowed: \(relayed)")
        run.remove()
    }

    /// The client gives up on its connection in a half-open partition (its heartbeat timed out) and stops for good.
    @Test("a client that stops for good after a fault (exit 0): a FAIL whose reason says 'never resumed' first, the exit after it")
    func clientThatNeverComesBack() async throws {
        let common = "--send-for 30 --heartbeat 0.5 --timeout 1.5"
        let scenario = """
            name: never-resumed
            duration: 6s
            proxies:
              - {name: stream, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
            pair:
              server:
                run: python3 \(Self.resumable) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl \(common)
                ready: tcp 127.0.0.1:{upstream.port}
              client:
                run: python3 \(Self.resumable) client --connect 127.0.0.1:{listen.port} --stream c1 --log {run_dir}/client-1.jsonl --quit-after-close \(common)
                count: 1
                ready: connected
            protocol:
              framing: lines
              seq: seq
              stream: stream
              ack: ack
              ignore: {type: [PING, PONG, HELLO, WELCOME, ACK]}
            faults:
              - partition: {at: 1s, for: 3s, direction: both}
            expect:
              lost: 0
            """
        let file = try ChaosCLI.scenarioFile(scenario)
        let run = try await RunFolderUnderTest.run([file], timeout: 60)
        #expect(run.result.status == 1, "exit \(run.result.status): \(run.result.stdout)\n\(run.result.stderr)")
        let json = try Self.reportJSON(run)
        #expect(json["verdict"] as? String == "fail")
        let reason = json["verdict_reason"] as? String ?? ""
        let finding = try Regex(#"^\d+ streams? never resumed after a fault; "#)
        #expect(reason.firstMatch(of: finding) != nil, "the finding first: \(reason)")
        #expect(reason.contains("pair process(es) exited during the run: client-1 with status 0"), "\(reason)")
        let ok = ((json["totals"] as? [String: Any])?["ok"] as? Int) ?? 0
        #expect(ok > 0, "messages were audited before the close")
        run.remove()
    }
}
