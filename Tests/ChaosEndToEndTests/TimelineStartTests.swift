import Foundation
import Testing

/// `pair.client.ready: connected`: the timeline (its faults and its duration) starts once every client has a
/// connection through a proxy, so a pair slow to start still meets its faults at the scenario's times; a client that
/// never connects through a proxy ends the run with exit 2 naming the problem.
@Suite("The timeline starts once the clients are connected (ready: connected)")
struct TimelineStartTests {
    /// A scenario of the demo pair whose one client starts `delay` seconds late and whose one fault, a reset at 1 s,
    /// must cut its connection.
    static func scenario(clientDelay delay: Int, connect: String = "{listen.port}", ready: Bool = true, duration: Int = 3) -> String {
        """
        name: late-client
        duration: \(duration)s
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
            run: sh -c 'sleep \(delay); exec \(ChaosCLI.executable) demo client --connect 127.0.0.1:\(connect) --stream c{index} --rate 20 --log {run_dir}/client-{index}.jsonl'
            count: 1
        \(ready ? "    ready: connected" : "")
            stop_grace: 2s
        protocol:
          framing: lines
          format: json
          seq: seq
          stream: stream
          ack: ack
          ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
        faults:
          - disconnect: {at: 1s, mode: reset}
        """
    }

    /// The report's faults and its `extra`, read as JSON.
    static func report(_ run: RunFolderUnderTest) throws -> (faults: [[String: Any]], extra: [String: String]) {
        let json = try #require(try JSONSerialization.jsonObject(with: run.file("report.json")) as? [String: Any])
        return (json["faults"] as? [[String: Any]] ?? [], json["extra"] as? [String: String] ?? [:])
    }

    @Test(
        "a client that starts 3 s late meets the reset at 1 s after it connected, and the run lasts its duration from then; without ready: connected the reset hits nobody",
        arguments: [true, false]
    )
    func lateClientMeetsItsFault(ready: Bool) async throws {
        // Without ready, the run's clock starts with the server: 6 s leave the late client three to carry messages (with
        // 3 s it connected as the run ended, on a loaded machine before any message: inconclusive, fresh-clone run s63q2).
        let file = try ChaosCLI.scenarioFile(Self.scenario(clientDelay: 3, ready: ready, duration: ready ? 3 : 6))
        let run = try await RunFolderUnderTest.run([file], timeout: 60)
        #expect(run.result.status == 0, "exit \(run.result.status): \(run.result.stdout)\n\(run.result.stderr)")
        let (faults, extra) = try Self.report(run)
        let reset = try #require(faults.first, "the reset is in the report: \(faults)")
        let at = reset["at_s"] as? Double ?? -1
        let cut = reset["connections"] as? Int ?? -1
        if ready {
            let origin = try #require(extra["timeline.origin_s"].flatMap(Double.init), "extra: \(extra)")
            // The client slept 3 s before it even started: the timeline began once it connected.
            #expect(origin >= 3, "the timeline started at \(origin) s")
            #expect(abs(at - (origin + 1)) < 0.001, "the reset is reported at its time on the run's clock: \(at) s")
            #expect(cut == 1, "the reset cut the client's connection: \(reset)")
            let elapsed = try run.report().elapsedS
            #expect(elapsed >= origin + 3, "the 3 s duration counts from the timeline's start: elapsed \(elapsed) s")
            #expect(try run.report().totals.ok > 0, "messages were audited")
        } else {
            #expect(extra["timeline.origin_s"] == nil)
            #expect(at == 1, "\(reset)")
            #expect(cut == 0, "at 1 s the late client had no connection to cut: \(reset)")
            #expect(try run.report().totals.ok > 0, "messages were audited")
        }
        run.remove()
    }

    @Test(
        "ready: connected waits for every client, not for as many connections as clients: one client's two connections do not start the timeline while the other is still starting"
    )
    func everyClientNotEveryConnection() async throws {
        // Client 1 holds two connections at once; client 2 starts 3 s later.
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("clients-\(UUID().uuidString).sh")
        try """
        if [ "$1" = 1 ]; then
          exec python3 -c 'import socket, sys, time; held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(2)]; time.sleep(30)' "$2"
        fi
        sleep 3
        exec \(ChaosCLI.executable) demo client --connect 127.0.0.1:"$2" --stream c"$1" --rate 20
        """.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let text = Self.scenario(clientDelay: 0).split(separator: "\n", omittingEmptySubsequences: false).map { line in
            guard line.contains("run: sh -c 'sleep 0") else { return line.replacingOccurrences(of: "    count: 1", with: "    count: 2") }
            return "    run: sh \(script.path) {index} {listen.port}"
        }.joined(separator: "\n")
        #expect(text.contains("count: 2") && text.contains(script.path), "\(text)")
        let run = try await RunFolderUnderTest.run([try ChaosCLI.scenarioFile(text)], timeout: 60)
        #expect(run.result.status != 2, "exit \(run.result.status): \(run.result.stderr)")
        let (faults, extra) = try Self.report(run)
        let origin = try #require(extra["timeline.origin_s"].flatMap(Double.init), "extra: \(extra)")
        #expect(origin >= 3, "the timeline waited for the late client: it started at \(origin) s")
        #expect((faults.first?["connections"] as? Int ?? 0) >= 3, "the reset cut both clients' connections: \(faults)")
        run.remove()
    }

    @Test("a client that never connects through a proxy (pointed at the server) ends the run with exit 2 naming ready: connected")
    func clientPastTheProxy() async throws {
        let file = try ChaosCLI.scenarioFile(Self.scenario(clientDelay: 0, connect: "{upstream.port}"))
        let run = try await RunFolderUnderTest.run([file], timeout: 90)
        #expect(run.result.status == 2, "exit \(run.result.status): \(run.result.stdout)\n\(run.result.stderr)")
        let output = run.result.stdout + run.result.stderr
        #expect(output.contains("not connected (ready: connected) after 20 s"), "\(output)")
        #expect(output.contains("0 of 1 connections through the proxies"), "\(output)")
        run.remove()
    }
}
