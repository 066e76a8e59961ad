import ChaosAudit
import ChaosCore
import ChaosProtocols
import ChaosReport
import Foundation
import Testing

/// A 90-second quickstart-like run simulated event by event: three clients streaming through disconnects, a
/// partition, a handoff and a refusal; c3 is a naive client that resumes past what it lost.
/// Set CHAOS_SAMPLE_REPORT_DIR to keep its report folder (Benchmarks/screenshot-report.sh does).
@Suite("Sample run")
struct SampleRunTests {
    static let yaml = """
        name: quickstart
        duration: 90s
        seed: 42
        proxies:
          - name: stream
            listen: 127.0.0.1:7000
            upstream: 127.0.0.1:7001
        protocol:
          framing: lines
          format: json
          seq: seq
          stream: stream
          ignore: {type: [PING, PONG, HELLO, WELCOME]}
        faults:
          - disconnect: {every: 10s..25s, mode: reset}
          - partition:  {at: 40s, for: 8s, direction: both}
          - handoff:    {at: 60s, from: wifi, to: lte, blackout: 500ms}
          - refuse:     {at: 75s, for: 3s}
        expect:
          lost: 0
          duplicated: 0
          delivery: ">= 99.9%"
          recovery_p99: "< 10s"
        """

    static func run() throws -> RunReport {
        let scenario = try Scenario.parse(yaml: yaml, file: "quickstart.yaml")
        let timeline = Timeline(scenario: scenario, seed: 42)
        let occurrences = Array(timeline)
        let engine = try AuditEngine(spec: scenario.protocolSpec ?? ProtocolSpec(), deliveryPoint: .written)
        let endpoints = ConnectionEndpoints(proxy: "stream", client: "c", listen: "l", proxyLocal: "pl", server: "s")
        var random = SeededGenerator(seed: 42)
        var events: [TrafficEvent] = []
        let clients = ["c1", "c2", "c3"]
        var connection: [ConnectionID] = [1, 2, 3]
        var nextID: ConnectionID = 4
        var seq = [1, 1, 1]
        var delivered = [0, 0, 0]
        var downUntil: [Int64] = [0, 0, 0]
        for index in 0..<3 { events.append(TrafficEvent(time: 0, connection: connection[index], kind: .opened(endpoints))) }
        let step: Int64 = 50_000_000
        var faultIndex = 0
        var partitionUntil: Int64 = 0
        var refuseUntil: Int64 = 0
        for time in stride(from: step, to: Int64(90_000_000_000), by: Int(step)) {
            while faultIndex < occurrences.count, occurrences[faultIndex].at.nanoseconds <= time {
                let occurrence = occurrences[faultIndex]
                faultIndex += 1
                let at = occurrence.at.nanoseconds
                events.append(TrafficEvent(time: at, connection: 0, kind: .faultStarted(occurrence.mark)))
                events.append(TrafficEvent(time: occurrence.end.nanoseconds, connection: 0, kind: .faultEnded(occurrence.mark)))
                switch occurrence.kind {
                case .disconnect, .handoff, .refuse:
                    // a refuse is a server deploy here: the live connections drop too
                    if occurrence.kind == .refuse { refuseUntil = occurrence.end.nanoseconds }
                    let cut = occurrence.kind == .refuse ? at : occurrence.end.nanoseconds
                    for index in 0..<3 {
                        events.append(TrafficEvent(time: cut, connection: connection[index], kind: .closed(.client, .cutByFault)))
                        events.append(TrafficEvent(time: cut + 2_000_000, connection: connection[index], kind: .closed(.server, .reset)))
                        // the naive client reconnects at once, the others with jitter
                        downUntil[index] = cut + (index == 2 ? 5_000_000 : Int64(random.next(upperBound: 900_000_000)) + 100_000_000)
                        connection[index] = nextID
                        nextID += 1
                        if index == 2 {
                            seq[index] += 3
                        }  // resumes past what it lost
                        else {
                            seq[index] = delivered[index] + 1
                        }  // resumes from its ack
                    }
                case .partition: partitionUntil = occurrence.end.nanoseconds
                default: break
                }
            }
            for index in 0..<3 {
                if downUntil[index] > 0 {
                    guard time >= downUntil[index] else { continue }
                    if time < refuseUntil {
                        events.append(TrafficEvent(time: time, connection: 0, kind: .refused(proxy: "stream", reason: "refuse")))
                        downUntil[index] = time + 500_000_000
                        continue
                    }
                    events.append(TrafficEvent(time: downUntil[index], connection: connection[index], kind: .opened(endpoints)))
                    downUntil[index] = 0
                }
                let message = Array("{\"type\":\"MSG\",\"stream\":\"\(clients[index])\",\"seq\":\(seq[index])}\n".utf8)
                events.append(TrafficEvent(time: time, connection: connection[index], kind: .read(.server, message)))
                if time >= partitionUntil || index == 2 && time < partitionUntil - 7_000_000_000 {
                    events.append(TrafficEvent(time: time + 3_000_000, connection: connection[index], kind: .written(.client, message)))
                    delivered[index] = seq[index]
                }
                if time < partitionUntil { seq[index] = delivered[index] + 1 } else { seq[index] += 1 }
            }
        }
        events.sort { $0.time < $1.time }
        engine.ingest(events)
        let audit = engine.finish()
        let inputs = ReportInputs(
            scenario: "quickstart",
            seed: 42,
            startedAt: Date(timeIntervalSince1970: 1_795_000_000),
            elapsed: .seconds(Int64(90)),
            complete: true,
            timeline: timeline,
            audit: audit,
            expectations: scenario.expectations,
            replay: "chaos run Scenarios/quickstart.yaml --seed 42",
            planned: .seconds(Int64(90))
        )
        return RunReport(inputs)
    }

    @Test("a quickstart-like run with a naive client fails on lost messages and renders every file")
    func sampleRun() throws {
        let report = try Self.run()
        #expect(report.verdict == .fail)
        let c3 = try #require(report.streams.first { $0.stream == "c3" })
        let c1 = try #require(report.streams.first { $0.stream == "c1" })
        #expect(c3.counts.lost > 0 && c3.counts.gaps > 0)
        #expect(c1.counts.lost == 0)
        #expect(report.faults.count >= 5)
        #expect(report.recovery.reconnectS.count >= 3 && report.recovery.resumeS.count >= 6)
        #expect(report.connections.refused > 0)
        let directory = ProcessInfo.processInfo.environment["CHAOS_SAMPLE_REPORT_DIR"] ?? ReportFixtures.temporaryDirectory()
        try report.write(toDirectory: directory)
        #expect(try RunReport.load(fromDirectory: directory) == report)
        if ProcessInfo.processInfo.environment["CHAOS_SAMPLE_REPORT_DIR"] == nil { try FileManager.default.removeItem(atPath: directory) }
    }
}
