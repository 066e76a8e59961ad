import Foundation
import Testing

/// A UDP datagram pair (plain Python sockets, one JSON message per datagram; Tests/Fixtures/pairs/udp_pair.py)
/// through a `udp://` proxy of `chaos run` with seeded loss, duplication, jitter and a partition: the audit's ok, lost,
/// duplicated and reordered equal what the receivers logged, and the run passes on its delivery floor, not on zero loss.
@Suite("UDP pair: the datagram audit equals the receivers' logs", .serialized, .timeLimit(.minutes(3)))
struct UDPPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/udp_pair.py").path

    /// The timeline starts once both clients are connected (their first datagrams reached the proxy): they send for
    /// 12 s from their own start, so that every fault, the partition at 5.2 s too, meets datagrams however late the
    /// timeline starts (up to 6.5 s after them: fresh-clone run s63q3's began 3.5-5 s after them, beside eleven lanes,
    /// and 8 s of sending were over before the partition), and stop at least 2 s before the end (14 s).
    /// The partition lasts 1 s: s64q2's (300 ms, beside twelve lanes starting at once) dropped nothing, its relay's
    /// thread starved through it (its start and end ran with no datagram read between), though 400 a second crossed.
    static func scenario(listen: Int, upstream: Int) -> String {
        """
        name: udp-pair
        duration: 14s
        seed: 3
        proxies:
          - {name: datagrams, listen: "udp://127.0.0.1:\(listen)", upstream: "udp://127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl
            stop_grace: 1s
          client:
            run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --stream c{index} --send-for 12 --interval 0.01 --log {run_dir}/client-{index}.jsonl
            count: 2
            ready: connected
            stop_grace: 1s
        protocol:
          framing: datagram
          format: json
          stream: stream
          seq: seq
          ignore: {type: [HELLO, WELCOME]}
        faults:
          - loss: {at: 1s, for: 1500ms, rate: 20%, burst: 2}
          - duplicate: {at: 2600ms, for: 800ms, rate: 10%}
          - latency: {at: 3500ms, for: 1500ms, add: 20ms, jitter: 15ms}
          - partition: {at: 5200ms, for: 1s}
        expect:
          delivery: ">= 60%"
          messages: 500
        """
    }

    @Test(
        "loss, duplication, jitter and a partition: ok, lost, duplicated and reordered per stream equal the receivers' logs; the run passes on its delivery floor"
    )
    func auditEqualsLogs() async throws {
        let run = try await ThirdPartyPairRun.run("udp-pair", capture: false) { Self.scenario(listen: $0, upstream: $1) }
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost > 0, "the loss and the partition dropped datagrams")
        #expect(duplicated > 0, "the duplicate fault sent datagrams twice")
        let streams = try DeliveredMeansAcknowledgedTests.streams(run.folder)
        let reorders = try Self.loggedReorders(run.folder)
        #expect(reorders.values.reduce(0, +) > 0, "the jitter reordered datagrams: \(reorders)")
        for (key, count) in reorders {
            #expect(streams[key]?["reordered"] == Int64(count), "\(key): reordered \(streams[key]?["reordered"] ?? -1) vs \(count) logged")
        }
        let extra = json["extra"] as? [String: Any] ?? [:]
        #expect(Int(extra["proxy.datagrams.datagrams_dropped.loss"] as? String ?? "") ?? 0 > 0, "\(extra)")
        #expect(Int(extra["proxy.datagrams.datagrams_dropped.dead-path"] as? String ?? "") ?? 0 > 0, "\(extra)")
        #expect(Int(extra["proxy.datagrams.datagrams_duplicated"] as? String ?? "") == Int(duplicated), "\(extra)")
    }

    /// Per stream, how many first arrivals came after a higher seq (the audit's `reordered`), from the logs' order.
    static func loggedReorders(_ folder: String) throws -> [String: Int] {
        var highest: [String: Int] = [:]
        var seen: [String: Set<Int>] = [:]
        var reorders: [String: Int] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder).filter({ $0.hasSuffix(".jsonl") }).sorted() {
            for line in try String(contentsOfFile: "\(folder)/\(name)", encoding: .utf8).split(separator: "\n") {
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let stream = object["stream"] as? String, let direction = object["dir"] as? String, let seq = object["seq"] as? Int
                else { continue }
                let key = "\(stream)/\(direction == "up" ? "upstream" : "downstream")"
                guard seen[key, default: []].insert(seq).inserted else { continue }
                if seq < highest[key, default: 0] { reorders[key, default: 0] += 1 } else { highest[key] = seq }
                reorders[key, default: 0] += 0
            }
        }
        return reorders
    }
}
