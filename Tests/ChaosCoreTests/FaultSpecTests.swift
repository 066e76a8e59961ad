import ChaosCore
import ChaosProtocols
import Foundation
import Testing

/// One fault type from scenario to effect: `FaultSpec` written (ranges) and drawn (values).
@Suite("FaultSpec, written and drawn")
struct FaultSpecTests {
    static let header = """
        name: t
        duration: 10s
        proxies:
          - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
        faults:

        """

    @Test(
        "a scenario cannot name a toxic-only kind: the message is the one for any unknown kind",
        arguments: ["slow_close", "limit_data", "reset_peer", "timeout"]
    )
    func toxicKindsAreNotScenarioFaults(kind: String) throws {
        let error = try #require(throws: ChaosError.self) {
            try Scenario.parse(yaml: Self.header + "  - \(kind): {at: 1s}\n", file: "t.yaml")
        }
        #expect(
            "\(error)".contains(
                "t.yaml:6:5: error: unknown key '\(kind)' in a fault; expected one of: disconnect, latency, "
                    + "bandwidth, partition, handoff, refuse, slice, stall, link, loss, mtu, radio, nat, duplicate, reorder, rebind, handshake, restart, ws-close, "
                    + "goaway, mqtt-disconnect"
            ),
            "\(error)"
        )
    }

    @Test("mqtt-disconnect, declared by the MQTT plug-in: a reason in hex or decimal, its defaults, and it needs MQTT frames")
    func mqttDisconnect() throws {
        let scenario = try Scenario.parse(
            yaml: Self.header + "  - mqtt-disconnect: {at: 1s, reason: 0x8E}\n  - mqtt-disconnect: {at: 2s, reason: 0, grace: 3s}\n",
            file: "t.yaml"
        )
        #expect(scenario.faults.map(\.kind) == [.protocolFault("mqtt-disconnect"), .protocolFault("mqtt-disconnect")])
        #expect(scenario.faults.map(\.parameters.summary) == ["reason=142 grace=1s", "reason=0 grace=3s"])
        #expect(scenario.framesFollowed(framings: ProtocolRegistry.catalog) == "mqtt")
        let mixed = try #require(throws: ChaosError.self) {
            try Scenario.parse(yaml: Self.header + "  - mqtt-disconnect: {at: 1s}\n  - ws-close: {at: 2s}\n", file: "t.yaml")
        }
        #expect("\(mixed)".contains("t.yaml:7:5: error: a ws-close fault needs websocket frames, but an earlier fault needs mqtt frames"), "\(mixed)")
        let audited = try #require(throws: ChaosError.self) {
            try Scenario.parse(
                yaml: Self.header.replacingOccurrences(of: "faults:", with: "protocol: {framing: websocket}\nfaults:")
                    + "  - mqtt-disconnect: {at: 1s}\n",
                file: "t.yaml"
            )
        }
        #expect("\(audited)".contains("a mqtt-disconnect fault needs mqtt frames, but protocol.framing reads websocket"), "\(audited)")
    }

    @Test(
        "eio-upgrade-hang, a plug-in's fault that lasts: it needs 'for', its occurrences last it, and it needs socketio frames; an instant one takes no 'for'"
    )
    func lastingProtocolFault() throws {
        let scenario = try Scenario.parse(yaml: Self.header + "  - eio-upgrade-hang: {at: 1s, for: 4s, hold: 2s}\n", file: "t.yaml")
        #expect(scenario.faults.map(\.parameters.summary) == ["hold=2s"])
        #expect(scenario.framesFollowed(framings: ProtocolRegistry.catalog) == "socketio")
        let occurrence = try #require(Array(Timeline(scenario: scenario, seed: 1)).first)
        #expect(occurrence.at == .seconds(Int64(1)) && occurrence.lasts == .seconds(Int64(4)))
        for (line, message) in [
            ("  - eio-upgrade-hang: {at: 1s}", "t.yaml:6:23: error: eio-upgrade-hang fault lasts: it needs 'for'"),
            ("  - eio-poll-hang: {at: 1s, for: 2s}", "t.yaml:6:34: error: eio-poll-hang fault happens at an instant and takes no 'for'"),
        ] {
            let error = try #require(throws: ChaosError.self) { try Scenario.parse(yaml: Self.header + line + "\n", file: "t.yaml") }
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    /// A scenario with a pair whose server a `restart` fault restarts.
    static let withPair = """
        name: t
        duration: 10s
        proxies:
          - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
        pair:
          server: {run: chaos demo server --listen 127.0.0.1:7001, ready: tcp 127.0.0.1:7001}
        faults:

        """

    @Test("restart: the server is down for its drawn 'down', stopped with SIGTERM unless it says kill; it lasts its down time")
    func restart() throws {
        let scenario = try Scenario.parse(
            yaml: Self.withPair + "  - restart: {at: 2s, down: 1s..3s}\n  - restart: {every: 4s, signal: kill}\n",
            file: "t.yaml"
        )
        #expect(scenario.faults.map(\.kind) == [.restart, .restart])
        #expect(scenario.faults[0].parameters == .restart(down: DurationRange(.seconds(Int64(1)), .seconds(Int64(3))), signal: .term))
        #expect(scenario.faults[1].parameters == .restart(down: DurationRange(exactly: .seconds(Int64(1))), signal: .kill))
        let first = try #require(Timeline(scenario: scenario, seed: 3).first { $0.rule == 0 })
        guard case .restart(let down, .term) = first.effect else {
            Issue.record("not a restart: \(first.effect)")
            return
        }
        #expect(first.lasts == down && (ChaosDuration.seconds(Int64(1))...ChaosDuration.seconds(Int64(3))).contains(down))
        #expect(first.effect.summary == "down=\(down) signal=term")
    }

    @Test(
        "restart mistakes: no pair.server, a 'for', targets or a proxy, a bad signal",
        arguments: [
            (false, "  - restart: {at: 2s}", "t.yaml:6:5: error: a restart fault restarts the pair's server, but the scenario has no pair.server"),
            (true, "  - restart: {at: 2s, for: 3s}", "t.yaml:8:28: error: restart fault takes no 'for': it lasts its 'down'"),
            (true, "  - restart: {at: 2s, targets: 1}", "t.yaml:8:32: error: restart fault restarts the pair's server: it takes no 'targets'"),
            (true, "  - restart: {at: 2s, proxy: p}", "t.yaml:8:30: error: restart fault restarts the pair's server: it takes no 'proxy'"),
            (true, "  - restart: {at: 2s, signal: hup}", "t.yaml:8:31: error: restart fault.signal"),
        ]
    )
    func restartMistakes(pair: Bool, line: String, message: String) throws {
        let error = try #require(throws: ChaosError.self) {
            try Scenario.parse(yaml: (pair ? Self.withPair : Self.header) + line + "\n", file: "t.yaml")
        }
        #expect("\(error)".contains(message), "\(error)")
    }

    @Test("drawing maps only the ranged fields, in field order; the rest is the value written")
    func drawing() {
        var generator = SeededGenerator(seed: 5)
        let written = FaultParameters.latency(
            add: DurationRange(.milliseconds(10), .milliseconds(90)),
            jitter: .milliseconds(3),
            direction: .upstream
        )
        var again = SeededGenerator(seed: 5)
        #expect(
            written.drawn(with: &generator)
                == .latency(
                    add: again.draw(DurationRange(.milliseconds(10), .milliseconds(90))),
                    jitter: .milliseconds(3),
                    direction: .upstream
                )
        )
        let slice = FaultParameters.slice(maxBytes: 4, delay: DurationRange(.zero, .milliseconds(2)), direction: .both, variation: 1)
        #expect(slice.drawn(with: &generator) == .slice(maxBytes: 4, delay: DurationRange(.zero, .milliseconds(2)), direction: .both, variation: 1))
        #expect(written.summary == "add=10ms..90ms jitter=3ms direction=upstream")
    }

    @Test("a slice without a variation encodes as before, and an older slice (no variation) reads back")
    func sliceEncoding() throws {
        let old = #"{"slice":{"delay":"1ms","direction":"both","maxBytes":16}}"#
        let decoded = try JSONDecoder().decode(FaultEffect.self, from: Data(old.utf8))
        #expect(decoded == .slice(maxBytes: 16, delay: DurationRange(exactly: .milliseconds(1)), direction: .both))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(decoded), as: UTF8.self) == old)
    }

    @Test("a replayed timeline's drawn effects are checked by the rules a scenario's parameters obey, with the same messages")
    func replayedEffectsChecked() throws {
        let scenario = try Scenario.parse(yaml: Self.header + "  - latency: {at: 1s, for: 1s, add: 5ms}\n", file: "t.yaml")
        let bad = FaultOccurrence(
            index: 0,
            rule: 0,
            at: .seconds(Int64(1)),
            lasts: .seconds(Int64(1)),
            proxy: nil,
            targets: .all,
            seed: 1,
            effect: .latency(add: ChaosDuration(nanoseconds: -1), jitter: .zero, direction: .both)
        )
        let timeline = Timeline(seed: 1, duration: scenario.duration, occurrences: [bad])
        let error = try #require(throws: ChaosError.self) { try timeline.checkInvariants(against: scenario, source: "run/timeline.json") }
        #expect("\(error)".contains("run/timeline.json: occurrences[0].add must be at least 0 and at most 10 years, found"), "\(error)")
    }

    @Test("a handshake fault: mode stall by default, its summary and JSON; only on a tls: proxy, named where it is written")
    func handshakeFault() throws {
        let proxies = """
            name: t
            duration: 10s
            proxies:
              - {name: plain, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
              - {name: secure, listen: "127.0.0.1:7002", upstream: "127.0.0.1:7003", tls: {upstream: insecure}}
            faults:

            """
        let scenario = try Scenario.parse(
            yaml: proxies + "  - handshake: {at: 1s, for: 2s}\n  - handshake: {every: 3s, for: 1s, mode: fail, proxy: secure}\n",
            file: "t.yaml"
        )
        #expect(scenario.faults.map(\.parameters) == [.handshake(mode: .stall), .handshake(mode: .fail)])
        #expect(FaultEffect.handshake(mode: .fail).summary == "mode=fail")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(FaultEffect.handshake(mode: .fail)), as: UTF8.self) == #"{"handshake":{"mode":"fail"}}"#)
        let error = try #require(throws: ChaosError.self) {
            try Scenario.parse(yaml: proxies + "  - handshake: {at: 1s, for: 2s, proxy: plain}\n", file: "t.yaml")
        }
        #expect(
            "\(error)".contains("t.yaml:7:5: error: a handshake fault acts on TLS handshakes, but proxy 'plain' has no tls: block"),
            "\(error)"
        )
    }

    @Test("loss and mtu: defaults (burst 1, size 1280, both ways), percent or fraction, summaries, JSON round trip")
    func lossAndMTU() throws {
        let scenario = try Scenario.parse(
            yaml: Self.header + """
                  - loss: {at: 1s, for: 2s, rate: 2%, burst: 3, direction: upstream}
                  - loss: {at: 1s, for: 2s, rate: 0.005}
                  - mtu: {at: 1s, for: 2s}
                  - mtu: {at: 1s, for: 2s, size: 576, direction: downstream}

                """,
            file: "t.yaml"
        )
        #expect(
            scenario.faults.map(\.parameters) == [
                .loss(rate: 0.02, burst: 3, direction: .upstream), .loss(rate: 0.005, burst: 1, direction: .both),
                .mtu(size: 1280, direction: .both), .mtu(size: 576, direction: .downstream),
            ]
        )
        #expect(
            scenario.faults.map(\.parameters.summary) == [
                "rate=2% burst=3 direction=upstream", "rate=0.5% burst=1 direction=both",
                "size=1280 direction=both", "size=576 direction=downstream",
            ]
        )
        for fault in scenario.faults {
            let data = try JSONEncoder().encode(fault.parameters)
            #expect(try JSONDecoder().decode(FaultParameters.self, from: data) == fault.parameters)
        }
    }

    @Test("radio, nat and a handoff's dead WiFi and new address parse with their defaults and round-trip through JSON")
    func radioNATAndHandoff() throws {
        let scenario = try Scenario.parse(
            yaml: Self.header + """
                  - radio: {at: 1s, for: 2s}
                  - radio: {at: 1s, for: 2s, promotion: 2s, tail: 14s, per: connection}
                  - nat: {at: 1s, for: 2s}
                  - nat: {at: 1s, for: 2s, idle_timeout: 20s}
                  - handoff: {at: 1s, blackout: 1s, dead_wifi: 2s..8s, new_address: true}
                  - handoff: {at: 1s, new_address: 127.0.0.3-127.0.0.4}
                  - link: {at: 1s, for: 2s, profile: {latency: 10ms, radio: {tail: 5s}, nat: {idle_timeout: 1m}}}

                """,
            file: "t.yaml"
        )
        let parameters = scenario.faults.map(\.parameters)
        #expect(parameters[0] == .radio(.lte))
        #expect(parameters[1] == .radio(RadioModel(promotion: .seconds(Int64(2)), tail: .seconds(Int64(14)), perConnection: true)))
        #expect(parameters[2] == .nat(idleTimeout: .seconds(Int64(300))))
        #expect(parameters[3] == .nat(idleTimeout: .seconds(Int64(20))))
        guard case .handoff(_, _, let blackout, _, let deadWiFi, let pool) = parameters[4] else {
            Issue.record("not a handoff")
            return
        }
        #expect(blackout == DurationRange(exactly: .seconds(Int64(1))))
        #expect(deadWiFi == DurationRange(.seconds(Int64(2)), .seconds(Int64(8))))
        #expect(pool == (2...9).map { "127.0.0.\($0)" })
        guard case .handoff(_, _, _, _, nil, let range) = parameters[5] else {
            Issue.record("not a plain handoff")
            return
        }
        #expect(range == ["127.0.0.3", "127.0.0.4"])
        guard case .link(let profile) = parameters[6] else {
            Issue.record("not a link")
            return
        }
        #expect(profile.radio == RadioModel(promotion: .milliseconds(260), tail: .seconds(Int64(5))))
        #expect(profile.natIdleTimeout == .seconds(Int64(60)))
        #expect(
            scenario.faults.map(\.parameters.summary).prefix(4) == [
                "promotion=260ms tail=11.5s", "promotion=2s tail=14s per=connection",
                "idle_timeout=5m", "idle_timeout=20s",
            ]
        )
        for fault in scenario.faults {
            let data = try JSONEncoder().encode(fault.parameters)
            #expect(try JSONDecoder().decode(FaultParameters.self, from: data) == fault.parameters)
        }
        // A handoff with a dead WiFi lasts it and its blackout.
        let timeline = Timeline(scenario: scenario, seed: 5)
        let handoff = try #require(timeline.first { $0.rule == 4 })
        guard case .handoff(_, _, let drawnBlackout, _, let drawnDeadWiFi?, _) = handoff.effect else {
            Issue.record("no dead WiFi drawn")
            return
        }
        #expect(handoff.lasts == drawnBlackout + drawnDeadWiFi)
    }
}
