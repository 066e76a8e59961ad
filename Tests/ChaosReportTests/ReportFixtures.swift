import ChaosAudit
import ChaosCore
import ChaosProtocols
import ChaosReport
import Foundation

/// Builds reports from a small real scenario and hand-made traffic.
enum ReportFixtures {
    static let yaml = """
        name: fixture
        duration: 20s
        seed: 7
        proxies:
          - name: stream
            listen: 127.0.0.1:7000
            upstream: 127.0.0.1:7001
        protocol:
          framing: lines
          format: json
          seq: seq
          stream: stream
        faults:
          - disconnect: {at: 2s, mode: reset}
          - partition: {at: 8s, for: 3s, direction: both}
        expect:
          lost: 0
          duplicated: 0
          delivery: ">= 99%"
          recovery_p99: "< 10s"
        """

    static func message(_ seq: Int, key: String = "seq") -> [UInt8] {
        Array("{\"type\":\"MSG\",\"stream\":\"c1\",\"\(key)\":\(seq)}\n".utf8)
    }

    /// A run with the scenario's faults; `skip` seqs are never delivered (resumed past them); `key` is where the
    /// messages carry their seq (not `seq`: nothing is audited).
    /// `framing`: the scenario's framing (not `lines`: one the messages do not fit).
    static func report(skip: Set<Int> = [], error: String? = nil, key: String = "seq", framing: String = "lines") throws -> RunReport {
        let scenario = try Scenario.parse(yaml: yaml.replacingOccurrences(of: "framing: lines", with: "framing: \(framing)"), file: "fixture.yaml")
        let timeline = Timeline(scenario: scenario, seed: 7)
        let engine = try AuditEngine(spec: scenario.protocolSpec ?? ProtocolSpec(), deliveryPoint: .written)
        let endpoints = ConnectionEndpoints(proxy: "stream", client: "c", listen: "l", proxyLocal: "pl", server: "s")
        var connection: ConnectionID = 1
        var events: [TrafficEvent] = [TrafficEvent(time: 0, connection: 1, kind: .opened(endpoints))]
        for seq in 1...200 {
            let time = Int64(seq) * 100_000_000
            for occurrence in Array(timeline)
            where occurrence.at.nanoseconds <= time
                && occurrence.at.nanoseconds > time - 100_000_000
            {
                events.append(TrafficEvent(time: occurrence.at.nanoseconds, connection: 0, kind: .faultStarted(occurrence.mark)))
                if occurrence.kind == .disconnect {
                    events.append(TrafficEvent(time: occurrence.at.nanoseconds, connection: connection, kind: .closed(.client, .cutByFault)))
                    events.append(TrafficEvent(time: occurrence.at.nanoseconds, connection: connection, kind: .closed(.server, .cutByFault)))
                    connection += 1
                    events.append(TrafficEvent(time: occurrence.at.nanoseconds + 400_000_000, connection: connection, kind: .opened(endpoints)))
                }
                events.append(TrafficEvent(time: occurrence.end.nanoseconds, connection: 0, kind: .faultEnded(occurrence.mark)))
            }
            guard !skip.contains(seq) else { continue }
            events.append(TrafficEvent(time: time, connection: connection, kind: .read(.server, message(seq, key: key))))
            events.append(TrafficEvent(time: time + 1_000_000, connection: connection, kind: .written(.client, message(seq, key: key))))
        }
        events.sort { $0.time < $1.time }
        engine.ingest(events)
        let audit = engine.finish()
        let inputs = ReportInputs(
            scenario: scenario.name,
            seed: 7,
            startedAt: Date(timeIntervalSince1970: 1_795_000_000),
            elapsed: .seconds(Int64(20)),
            complete: true,
            timeline: timeline,
            audit: audit,
            expectations: scenario.expectations,
            replay: "chaos run Scenarios/fixture.yaml --seed 7",
            faultConnections: [0: 1],
            pairExits: ["server": 0, "client-1": 0],
            errorReason: error
        )
        return RunReport(inputs)
    }

    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "chaos-report-tests-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
