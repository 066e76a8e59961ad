import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

@Suite("UDP proxies in scenarios")
struct UDPScenarioTests {
    static let datagrams = """
        name: datagrams
        duration: 30s
        proxies:
          - name: telemetry
            listen: udp://127.0.0.1:9000
            upstream: udp://127.0.0.1:9001
        protocol:
          framing: datagram
          seq: seq
          stream: stream
        faults:
          - loss: {at: 5s, for: 5s, rate: 10%}
          - latency: {at: 12s, for: 3s, add: 50ms, jitter: 40ms}
          - nat: {at: 16s, for: 10s, idle_timeout: 2s}
        """

    @Test("udp:// on listen and upstream makes a UDP proxy; its datagram faults and the datagram framing are accepted")
    func parsesAUDPProxy() throws {
        let scenario = try Scenario.parse(yaml: Self.datagrams, file: "datagrams.yaml")
        let proxy = try #require(scenario.proxies.first)
        #expect(proxy.transport == .udp)
        #expect(proxy.listen == HostPort(host: "127.0.0.1", port: 9000))
        #expect(proxy.listenText == "udp://127.0.0.1:9000" && proxy.upstreamText == "udp://127.0.0.1:9001")
        #expect(scenario.protocolSpec?.framing.name == "datagram")
        #expect(scenario.faults.map(\.kind) == [.loss, .latency, .nat])
    }

    @Test("a UDP and a TCP proxy may listen on the same port; a fault that only TCP meets may name the TCP one")
    func udpBesideTCP() throws {
        let yaml = """
            name: both
            duration: 30s
            proxies:
              - name: media
                listen: udp://127.0.0.1:9000
                upstream: udp://127.0.0.1:9001
              - name: control
                listen: tcp://127.0.0.1:9000
                upstream: 127.0.0.1:9002
            faults:
              - disconnect: {every: 5s..10s, proxy: control}
              - disconnect: {every: 5s..10s}
            """
        let scenario = try Scenario.parse(yaml: yaml, file: "both.yaml")
        #expect(scenario.proxies.map(\.transport) == [.udp, .tcp])
        let named = yaml.replacingOccurrences(of: "proxy: control", with: "proxy: media")
        let error = try #require(throws: ChaosError.self) { try Scenario.parse(yaml: named, file: "both.yaml") }
        #expect(error.message.contains("proxy 'media' is udp://"), "\(error.message)")
    }

    @Test("a scenario.json written before proxies had a transport reads as TCP; a UDP proxy's survives the round trip")
    func decodesOldAndNewSpecs() throws {
        let old = #"{"name": "p", "listen": {"host": "127.0.0.1", "port": 1}, "upstream": {"host": "127.0.0.1", "port": 2}}"#
        #expect(try JSONDecoder().decode(ProxySpec.self, from: Data(old.utf8)).transport == .tcp)
        let udp = ProxySpec(name: "u", listen: HostPort(host: "127.0.0.1", port: 1), upstream: HostPort(host: "127.0.0.1", port: 2), transport: .udp)
        #expect(try JSONDecoder().decode(ProxySpec.self, from: JSONEncoder().encode(udp)) == udp)
    }
}

extension UDPScenarioTests {
    @Test("duplicate, reorder and rebind parse on a UDP proxy; rebind is instant; on TCP-only proxies they are refused")
    func datagramOnlyFaults() throws {
        let yaml = Self.datagrams.replacingOccurrences(
            of: "  - nat: {at: 16s, for: 10s, idle_timeout: 2s}",
            with:
                "  - duplicate: {at: 16s, for: 2s, rate: 3%}\n  - reorder: {every: 5s, for: 1s, rate: 5%, direction: upstream}\n  - rebind: {at: 20s}"
        )
        let scenario = try Scenario.parse(yaml: yaml, file: "d.yaml")
        #expect(scenario.faults.map(\.kind) == [.loss, .latency, .duplicate, .reorder, .rebind])
        #expect(scenario.faults[2].parameters == .duplicate(rate: 0.03, direction: .both))
        let instant = yaml.replacingOccurrences(of: "rebind: {at: 20s}", with: "rebind: {at: 20s, for: 1s}")
        let error = try #require(throws: ChaosError.self) { try Scenario.parse(yaml: instant, file: "d.yaml") }
        #expect(error.message.contains("happens at an instant"), "\(error.message)")
        let tcp = """
            name: tcp
            duration: 30s
            proxies:
              - {name: stream, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
            faults:
              - duplicate: {at: 1s, for: 1s, rate: 1%}
            """
        let refused = try #require(throws: ChaosError.self) { try Scenario.parse(yaml: tcp, file: "t.yaml") }
        #expect(refused.message.contains("acts on UDP datagrams") && refused.location?.line == 6, "\(refused)")
    }
}

extension UDPScenarioTests {
    @Test("a handoff with new_address and a dead WiFi parses on a UDP proxy (its flows move to the new address); a slice there is still refused")
    func handoffOnAUDPProxy() throws {
        let yaml = Self.datagrams.replacingOccurrences(
            of: "  - nat: {at: 16s, for: 10s, idle_timeout: 2s}",
            with: "  - handoff: {at: 16s, dead_wifi: 2s, blackout: 500ms, from: wifi, to: lte, new_address: [127.0.0.2]}"
        )
        let scenario = try Scenario.parse(yaml: yaml, file: "d.yaml")
        #expect(scenario.faults.map(\.kind) == [.loss, .latency, .handoff])
        guard case .handoff(_, _, _, _, let deadWiFi, let newAddress) = scenario.faults[2].parameters else {
            Issue.record("\(scenario.faults[2].parameters)")
            return
        }
        #expect(newAddress == ["127.0.0.2"] && deadWiFi != nil)
        let slice = yaml.replacingOccurrences(of: "  - handoff: {at: 16s", with: "  - slice: {at: 16s, for: 1s}\n  - handoff: {at: 17s")
        let error = try #require(throws: ChaosError.self) { try Scenario.parse(yaml: slice, file: "d.yaml") }
        #expect(error.message.contains("a slice fault acts on TCP connections"), "\(error.message)")
    }
}
