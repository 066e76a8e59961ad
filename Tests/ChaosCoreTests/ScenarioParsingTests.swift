import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

/// The bad scenario files, each headed `# expect: LINE:COLUMN fragment of the message`.
let badScenarioDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Fixtures/bad-scenarios")

func badScenarioFiles() -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: badScenarioDirectory.path)) ?? [])
        .filter { $0.hasSuffix(".yaml") }.sorted()
}

@Suite("Scenario parsing")
struct ScenarioParsingTests {
    static let quickstart = """
        name: quickstart
        duration: 90s
        seed: 42
        proxies:
          - name: stream
            listen: 127.0.0.1:7000
            upstream: 127.0.0.1:7001
        pair:
          server:
            run: chaos demo server --listen 127.0.0.1:{upstream.port}
            ready: tcp 127.0.0.1:{upstream.port}
          client:
            run: chaos demo client --connect 127.0.0.1:{listen.port} --stream c{index}
            count: 3
        protocol:
          framing: lines
          format: json
          seq: seq
          stream: stream
          ack: ack
          ignore: {type: [PING, PONG, HELLO, WELCOME]}
        faults:
          - disconnect: {every: 5s..30s, mode: reset}
          - latency:    {every: 20s..40s, for: 2s..5s, add: 500ms..2s, jitter: 50ms, direction: downstream}
          - partition:  {at: 40s, for: 15s, direction: both}
          - handoff:    {at: 60s, from: wifi, to: lte, blackout: 200ms..800ms}
          - refuse:     {at: 75s, for: 5s}
          - bandwidth:  {at: 10s, for: 5s, rate: 1MB/s, direction: upstream, targets: 50%}
          - slice:      {at: 20s, for: 2s, size: 8}
          - stall:      {at: 30s, for: 1s}
          - link:       {at: 80s, for: 5s, profile: {latency: 80ms, jitter: 10ms, bandwidth_down: 2mbit}}
        expect:
          lost: 0
          duplicated: 0
          delivery: ">= 99.9%"
          recovery_p99: "< 10s"
        """

    @Test("the PRODUCT example scenario parses into the model it describes")
    func parsesTheExample() throws {
        let scenario = try Scenario.parse(yaml: Self.quickstart, file: "quickstart.yaml")
        #expect(scenario.name == "quickstart")
        #expect(scenario.duration == .seconds(Int64(90)))
        #expect(scenario.seed == 42)
        #expect(
            scenario.proxies == [
                ProxySpec(
                    name: "stream",
                    listen: HostPort(host: "127.0.0.1", port: 7000),
                    upstream: HostPort(host: "127.0.0.1", port: 7001)
                )
            ]
        )
        #expect(scenario.pair?.client?.count == 3)
        #expect(scenario.protocolSpec?.ignore["type"] == ["PING", "PONG", "HELLO", "WELCOME"])
        #expect(scenario.protocolSpec?.ack == "ack")
        #expect(
            scenario.faults.map(\.kind) == [
                .disconnect, .latency, .partition, .handoff, .refuse, .bandwidth,
                .slice, .stall, .link,
            ]
        )
        #expect(scenario.faults[0].schedule.every == DurationRange(.seconds(Int64(5)), .seconds(Int64(30))))
        #expect(scenario.faults[5].schedule.targets == .fraction(0.5))
        #expect(scenario.faults[5].parameters == .bandwidth(rate: ByteRate(bytesPerSecond: 1_000_000), direction: .upstream))
        #expect(scenario.faults[7].parameters == .stall(direction: .downstream))
        guard case .link(let profile) = scenario.faults[8].parameters else {
            Issue.record("not a link")
            return
        }
        #expect(profile.latency == .milliseconds(80))
        #expect(profile.bandwidthDown == ByteRate(bytesPerSecond: 250_000))
        #expect(scenario.expectations.map(\.name) == ["lost", "duplicated", "delivery", "recovery_p99"])
        #expect(scenario.expectations[2].comparison == .atLeast)
        #expect(abs(scenario.expectations[2].bound - 0.999) < 1e-9)
        #expect(scenario.expectations[3].comparison == .lessThan)
        #expect(scenario.expectations[3].bound == 10)
    }

    @Test("there are at least 15 bad scenario files to check")
    func enoughBadFiles() {
        #expect(badScenarioFiles().count >= 15)
    }

    @Test("every bad scenario is rejected with its line, column and what was expected", arguments: badScenarioFiles())
    func rejectsBadScenario(name: String) throws {
        let path = badScenarioDirectory.appendingPathComponent(name).path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let header = try #require(text.split(separator: "\n").first).dropFirst("# expect: ".count)
        let location = header.split(separator: " ")[0].split(separator: ":").compactMap { Int($0) }
        let fragment = header.split(separator: " ", maxSplits: 1)[1]
        let error = try #require(throws: ChaosError.self) { try Scenario.parse(yaml: text, file: name) }
        #expect(error.code == .badInput)
        #expect(error.location == ChaosError.Location(file: name, line: location[0], column: location[1]))
        #expect(error.message.contains(fragment), "message was: \(error.message)")
    }

    @Test("a typo in a key suggests the right one")
    func suggestsKeys() throws {
        let error = try #require(throws: ChaosError.self) {
            try Scenario.parse(yaml: "name: x\nduraton: 5s\n", file: "t.yaml")
        }
        #expect(error.message.contains("did you mean 'duration'?"))
        #expect(error.description.hasPrefix("t.yaml:2:1: error:"))
    }

    @Test(
        "addresses parse in both IPv4 and bracketed IPv6 forms",
        arguments: [
            ("127.0.0.1:7000", "127.0.0.1", 7000), ("[::1]:80", "::1", 80), ("localhost:0", "localhost", 0),
        ]
    )
    func addresses(text: String, host: String, port: Int) {
        #expect(HostPort(parsing: text) == HostPort(host: host, port: port))
    }

    @Test("bad addresses are refused", arguments: ["127.0.0.1", ":80", "host:-1", "host:65536", "a b:1", "::1:80"])
    func badAddresses(text: String) {
        #expect(HostPort(parsing: text) == nil)
    }
}
