import Foundation
import Testing

/// Third-party peers under the mobile path's faults: grpcio with HTTP/2 keepalive behind a carrier NAT, and Python
/// websockets pinging under the radio's RRC states. Both pairs stop producing early, so that only their keepalives
/// cross the path afterwards.
extension GRPCPairTests {
    @Test(
        "grpcio behind a NAT that forgets after 2 s: a 4 s keepalive dies silently and the report's finding names it and the pair's recovery; a 1 s keepalive keeps its connections: no loss, no finding",
        arguments: [4.0, 1.0]
    )
    func keepaliveThroughNAT(keepalive: Double) async throws {
        let run = try await Self.run(
            fields: .names,
            flags: "--send-for 3 --keepalive \(keepalive) --keepalive-timeout 1.5",
            faults: "  - nat: {at: 0s, for: 16s, idle_timeout: 2s}"
        )
        #expect(run.status == 0, "the run must pass: nothing was in flight when the connections died (\(run.folder))")
        let (lost, duplicated, json) = try Self.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let path = try #require(json["path"] as? [String: Any], "the report's mobile path section")
        let findings = path["findings"] as? [String] ?? []
        if keepalive > 2 {
            #expect((path["nat_expired"] as? Int ?? 0) >= 2, "both clients' quiet connections died: \(path)")
            #expect((path["nat_noticed"] as? Int ?? 0) >= 1, "the keepalive's timeout noticed: \(path)")
            let noticed = try #require(path["nat_noticed_s"] as? [String: Any])
            #expect((noticed["max"] as? Double ?? 0) > 0, "the time to notice is measured: \(noticed)")
            #expect(findings.contains { $0.contains("NAT's 2.0 s idle timeout") && $0.contains("the pair noticed") }, "\(findings)")
        } else {
            #expect((path["nat_expired"] as? Int ?? -1) == 0, "\(path)")
            #expect(findings.isEmpty, "\(findings)")
        }
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path)
    }
}

extension GRPCPairTests {
    /// The same NAT on the kernel dead path: the dead connections' segments are dropped, so grpcio's TCP sees no
    /// acknowledgement of its keepalive PING, and the socket option grpcio sets with its keepalive (TCP_USER_TIMEOUT, gRFC
    /// A18) can end the connection in its own kernel, as on a real network.
    ///
    /// gRFC A18 gives TCP_USER_TIMEOUT the keepalive's own timeout, so each end races its kernel: where grpcio's timer
    /// fires first, its close (a FIN) reaches the proxy and the report counts the pair noticing; where its kernel gives
    /// up first, the socket dies without a segment, as on a real dead path, and nothing reaches the proxy (seen in one run
    /// of about fifty for both clients' first connections at once: the report counted none noticed). So the pair's own
    /// logs say when it noticed, and the report's count is held to what it saw.
    @Test(
        "grpcio behind a NAT that forgets after 2 s, on the kernel dead path: a 4 s keepalive (1.5 s to answer) notices within its keepalive and timeout, nothing lost",
        .enabled(if: DeadPathTests.kernelPath, "needs root and nft (Debian's nftables): the kernel dead path")
    )
    func keepaliveThroughNATOnTheKernelPath() async throws {
        let (keepalive, timeout, sendFor, idle) = (4.0, 1.5, 3.0, 2.0)
        let run = try await Self.run(
            fields: .names,
            flags: "--send-for \(sendFor) --keepalive \(keepalive) --keepalive-timeout \(timeout)",
            faults: "  - nat: {at: 0s, for: 16s, idle_timeout: \(idle)s}",
            environment: ["CHAOS_DEAD_PATH": "kernel"]
        )
        #expect(run.status == 0, "the run must pass: nothing was in flight when the connections died (\(run.folder))")
        let (lost, duplicated, json) = try Self.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let extra = json["extra"] as? [String: Any] ?? [:]
        #expect((extra["dead_path"] as? String ?? "").hasPrefix("dropped in the kernel"), "\(extra)")
        let path = try #require(json["path"] as? [String: Any], "the report's mobile path section")
        #expect((path["nat_expired"] as? Int ?? 0) >= 2, "both clients' quiet connections died: \(path)")
        // From the mapping's death (`idle` after the last byte), the next PING goes at most keepalive - idle later and is
        // given up on `timeout` after that: noticed within keepalive + timeout (and a second for a loaded machine).
        let window = 0.1...(keepalive + timeout + 1)
        for client in 1...2 {
            let noticed = try Self.noticedAfterNATDeath(log: "\(run.folder)/client-\(client).jsonl", sendFor: sendFor, idle: idle)
            #expect(window.contains(noticed), "client \(client)'s first call ended \(noticed) s after its NAT mapping died")
        }
        let noticed = path["nat_noticed"] as? Int ?? 0
        if noticed > 0 {
            let times = try #require(path["nat_noticed_s"] as? [String: Any])
            #expect(window.contains(times["max"] as? Double ?? -1), "the closes that reached the proxy: \(times)")
        }
        #expect(noticed <= path["nat_expired"] as? Int ?? 0, "\(path)")
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path)
    }

    /// From a grpcio client's log: how long after its first connection's NAT mapping died (`idle` after the last byte
    /// either way: its last read, or the end of its `sendFor` of producing) its call ended UNAVAILABLE, on its own clock;
    /// requires that it then connected again.
    static func noticedAfterNATDeath(log: String, sendFor: Double, idle: Double) throws -> Double {
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        let entries = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let first = entries.filter { $0["conn"] as? Int == 1 }
        let connected = try #require(first.first { $0["event"] as? String == "connected" }?["t"] as? Double, "\(log)")
        let lastRead = first.compactMap { $0["seq"] != nil ? $0["t"] as? Double : nil }.max() ?? connected
        let ended = try #require(first.first { $0["event"] as? String == "call-ended" }, "the first call ended: \(log)")
        #expect(ended["code"] as? String == "UNAVAILABLE", "\(ended)")
        let endedAt = try #require(ended["t"] as? Double)
        #expect(entries.contains { $0["event"] as? String == "connected" && $0["conn"] as? Int == 2 }, "it reconnected: \(log)")
        return endedAt - (max(lastRead, connected + sendFor) + idle)
    }
}

extension WebSocketPairTests {
    @Test(
        "Python websockets pinging every 3 s under a radio per connection with a 2 s tail: each ping wakes the radio and the report shows the promotions and their cost; pinging every 0.4 s, the finding says the keepalive alone keeps the radio awake",
        arguments: [3.0, 0.4]
    )
    func pingsUnderTheRadio(heartbeat: Double) async throws {
        // Producing for 4 s from the clients' own start: under the heavy phase's load their Python start took over 2 s.
        let common = "--send-for 4 --heartbeat \(heartbeat) --timeout 6"
        let run = try await ThirdPartyPairRun.run("ws-radio", capture: false) {
            Self.scenario(
                listen: $0,
                upstream: $1,
                bug: "",
                name: "websocket-radio",
                duration: "14s",
                flags: common,
                // A 2 s tail: pings 0.4 s apart keep the radio awake even when a loaded machine holds one back by a
                // second (a 1 s tail let a Python client's stall idle it), and pings 3 s apart still let it idle.
                faults: "  - radio: {at: 0s, for: 14s, promotion: 500ms, tail: 2s, per: connection}"
            )
        }
        #expect(run.status == 0, "the run must pass (\(run.folder))")
        let (lost, duplicated, json) = try ThirdPartyPairRun.compare(run.folder)
        #expect(lost == 0 && duplicated == 0)
        let path = try #require(json["path"] as? [String: Any], "the report's mobile path section")
        let promotions = path["radio_promotions"] as? Int ?? 0
        let cost = path["radio_promotion_s"] as? Double ?? 0
        let findings = path["findings"] as? [String] ?? []
        let awake = findings.contains { $0.contains("never lets the radio idle") }
        if heartbeat > 1 {
            // About 9 s of pings only, one every 3 s per client, each on its own radio (one radio for both would let
            // one client's ping wake it for the other's): each ping (and the pong within its promotion) pays.
            #expect(promotions >= 4, "\(path)")
            #expect(cost > 0 && cost <= Double(promotions) * 0.5 + 0.001, "each promotion costs at most 500 ms: \(path)")
            #expect(!awake, "\(findings)")
            let report = try String(contentsOfFile: "\(run.folder)/report.md", encoding: .utf8)
            #expect(report.contains("radio promotions waited for"), "the markdown report shows them")
        } else {
            #expect(awake, "\(findings)")
        }
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path)
    }
}
