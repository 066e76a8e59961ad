import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

let scenariosDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios")

@Suite("The scenarios in Scenarios/")
struct ShippedScenariosTests {
    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scenariosDirectory.path)) ?? [])
            .filter { $0.hasSuffix(".yaml") }.sorted()
    }

    @Test("there are the scenarios the docs promise")
    func allThere() {
        #expect(
            Set(Self.files).isSuperset(of: [
                "quickstart.yaml", "naive.yaml", "half-open.yaml", "handoff.yaml",
                "herd.yaml", "soak-72h.yaml", "websocket.yaml", "grpc.yaml", "mqtt.yaml",
            ])
        )
    }

    @Test("every scenario file parses, validates and draws a timeline", arguments: files)
    func validates(name: String) throws {
        let scenario = try Scenario.load(path: scenariosDirectory.appendingPathComponent(name).path)
        #expect(scenario.name == String(name.dropLast(".yaml".count)))
        let timeline = Timeline(scenario: scenario, seed: scenario.seed ?? 1)
        #expect(!Array(timeline).isEmpty)
        #expect(scenario.protocolSpec != nil)
        #expect(!scenario.expectations.isEmpty)
    }

    @Test("the quickstart applies at least 10 faults of at least 5 kinds in about 90 s")
    func quickstartCoversEveryKind() throws {
        let scenario = try Scenario.load(path: scenariosDirectory.appendingPathComponent("quickstart.yaml").path)
        let timeline = Timeline(scenario: scenario, seed: scenario.seed ?? 1)
        #expect(Array(timeline).count >= 10)
        #expect(Set(Array(timeline).map(\.kind)).count >= 5)
        // Every fault a plain TCP pair can meet (the protocols' own faults need their pairs, handshake a TLS
        // proxy: the TLS scenarios have it; restart a server that keeps its state across a restart, as
        // Scenarios/mqtt.yaml's broker does and the reference pair's server does not; duplicate, reorder and rebind are
        // UDP's).
        let tcpKinds = Set(FaultKind.scenarioKinds.filter { $0 != .handshake && $0 != .restart && !$0.actsOnlyOnDatagrams })
        #expect(
            tcpKinds.subtracting(Array(timeline).map(\.kind)).isEmpty,
            "quickstart misses \(tcpKinds.subtracting(Array(timeline).map(\.kind)))"
        )
        #expect(scenario.duration <= .seconds(Int64(120)))
    }

    @Test("the 72-hour soak keeps faulting through the whole run")
    func soakSpansSeventyTwoHours() throws {
        let scenario = try Scenario.load(path: scenariosDirectory.appendingPathComponent("soak-72h.yaml").path)
        #expect(scenario.duration == .seconds(Int64(72 * 3600)))
        let timeline = Timeline(scenario: scenario, seed: 1)
        #expect(Array(timeline).last!.at > .seconds(Int64(71 * 3600)))
        #expect(Set(Array(timeline).map(\.kind)).isSuperset(of: [.disconnect, .latency, .partition, .handoff]))
    }

    @Test("the TLS scenarios have both handshake modes and a truncate, on a tls: proxy that verifies the demo server's own CA")
    func tlsScenarios() throws {
        for name in ["websocket-tls.yaml", "grpc-tls.yaml"] {
            let scenario = try Scenario.load(path: scenariosDirectory.appendingPathComponent(name).path)
            guard case .roots(let roots) = scenario.proxies[0].tls?.upstream else {
                Issue.record("\(name): no roots file")
                continue
            }
            #expect(roots.hasSuffix("Scenarios/tls/demo-ca.pem"))
            let effects = Array(Timeline(scenario: scenario, seed: scenario.seed ?? 1)).map(\.effect)
            #expect(effects.contains(.handshake(mode: .fail)) && effects.contains(.handshake(mode: .stall)), "\(name)")
            #expect(effects.contains(.disconnect(mode: .truncate, linger: .seconds(Int64(30)))), "\(name)")
        }
    }
}
