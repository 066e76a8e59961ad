import Foundation
import Testing

@Suite(
    "Capture: chaos run --capture, tcpdump, and chaos audit give the live audit's counts",
    .serialized,
    .timeLimit(.minutes(3))
)
struct CaptureAuditTests {
    static func scenario(listen: Int, upstream: Int) -> String {
        """
        name: capture-check
        duration: 10s
        seed: 3
        proxies:
          - {name: stream, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 40
            ready: tcp 127.0.0.1:{upstream.port}
          client:
            run: chaos demo client --connect 127.0.0.1:{listen.port} --stream c{index} --rate 40
            count: 2
            ready: connected
        protocol:
          framing: lines
          seq: seq
          stream: stream
          ack: ack
          ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
        faults:
          - disconnect: {at: 3s, mode: reset}
          - latency: {at: 5s, for: 1s, add: 200ms}
          - disconnect: {at: 7s, mode: close}
        expect:
          lost: 0
        """
    }

    static func totals(_ directory: String) throws -> [String: Double] {
        let data = try Data(contentsOf: URL(fileURLWithPath: directory).appendingPathComponent("report.json"))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let totals = try #require(json["totals"] as? [String: Any])
        return totals.compactMapValues { ($0 as? NSNumber)?.doubleValue }
    }

    @Test("the offline audit of our capture and of a tcpdump -i lo capture count exactly what the live audit counted")
    func offlineEqualsLive() async throws {
        let listen = ChaosCLI.freePort()
        let upstream = ChaosCLI.freePort()
        let file = try ChaosCLI.scenarioFile(Self.scenario(listen: listen, upstream: upstream))
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("capture-e2e-\(UUID().uuidString)")
        let runDir = base.appendingPathComponent("run").path
        let tcpdumpFile = base.appendingPathComponent("lo.pcap").path
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }

        let tcpdump = try await LoopbackTcpdump.start(ports: [listen, upstream], file: tcpdumpFile)
        defer { tcpdump.kill() }

        let run = try await ChaosCLI.run(["run", file, "--capture", "--out", runDir], timeout: 90)
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        try await tcpdump.stop()

        let live = try Self.totals(runDir)
        #expect((live["ok"] ?? 0) > 300)
        let ours = try await ChaosCLI.run(["audit", "\(runDir)/capture.pcap", "--protocol-from", file, "--out", "\(runDir)-ours"])
        #expect(ours.status == 0, "\(ours.stdout)\n\(ours.stderr)")
        let fromOurs = try Self.totals("\(runDir)-ours")
        let theirs = try await ChaosCLI.run([
            "audit", tcpdumpFile, "--protocol-from", file, "--proxy-port", "\(listen)",
            "--out", "\(runDir)-tcpdump",
        ])
        #expect(theirs.status == 0, "\(theirs.stdout)\n\(theirs.stderr)")
        let fromTcpdump = try Self.totals("\(runDir)-tcpdump")
        for key in ["sent", "delivered", "ok", "lost", "duplicated", "redelivered", "reordered", "gaps"] {
            #expect(fromOurs[key] == live[key], "\(key): our capture \(fromOurs[key] ?? -1), live \(live[key] ?? -1)")
        }
        for key in ["delivered", "ok", "lost", "duplicated", "redelivered", "reordered", "gaps"] {
            #expect(fromTcpdump[key] == live[key], "\(key): tcpdump \(fromTcpdump[key] ?? -1), live \(live[key] ?? -1)")
        }
        // `sent` and `recovered` may differ by a few. The wire carries messages the proxy never read: a producer
        // wrote them just before a fault reset that leg, the proxy's kernel acknowledged them, and the reset discarded
        // them unread. tcpdump counts them sent; the live audit counts what the proxy read. And a capture orders
        // events of different connections by packet time, so a message cut on one connection and delivered on the
        // next may be classed recovered there and not live, or the other way round. What was delivered, and so
        // every verdict-bearing count above, is exact. At most a message each way per connection a fault cut (a
        // fixed 4 was once exceeded by one: 1,693 sent on the wire, 1,688 read).
        let reportJSON = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: runDir).appendingPathComponent("report.json")))
                as? [String: Any]
        )
        let cut = ((reportJSON["connections"] as? [String: Any])?["cut_by_fault"] as? NSNumber)?.doubleValue ?? 0
        #expect(cut > 0, "the scenario's faults cut connections: \(reportJSON["connections"] ?? "?")")
        for key in ["sent", "recovered"] {
            let difference = abs((fromTcpdump[key] ?? 0) - (live[key] ?? 0))
            #expect(difference <= 2 * cut, "\(key): tcpdump \(fromTcpdump[key] ?? -1), live \(live[key] ?? -1), \(cut) connections cut")
        }
        // Our capture too orders the two legs' and the next connection's events by packet time, and a cut leg is read to
        // its end (the bytes a producer sent after a FIN cut count sent, as tcpdump shows them): whether such a message,
        // resent on the next connection, is classed recovered can differ the same way (seen: live 3, ours 0; live 2,
        // ours 1). `recovered` bears no verdict; every count above is exact.
        let recoveredDifference = abs((fromOurs["recovered"] ?? 0) - (live["recovered"] ?? 0))
        #expect(
            recoveredDifference <= 2 * cut,
            "recovered: our capture \(fromOurs["recovered"] ?? -1), live \(live["recovered"] ?? -1), \(cut) connections cut"
        )
        #expect(theirs.stdout.contains("capture loss 0 bytes"), "\(theirs.stdout)")

        // tshark reads our capture with nothing malformed (its lines as data, whatever protocol their ports are registered to).
        let tshark = Process()
        tshark.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        tshark.arguments =
            ["tshark", "-r", "\(runDir)/capture.pcap"] + (try TsharkDecodeAs.arguments("\(runDir)/capture.pcap", as: "data"))
            + ["-Y", "_ws.malformed || _ws.expert.severity == error"]
        let pipe = Pipe()
        tshark.standardOutput = pipe
        tshark.standardError = FileHandle.nullDevice
        try tshark.run()
        let malformed = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        tshark.waitUntilExit()
        #expect(tshark.terminationStatus == 0)
        #expect(malformed.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "tshark: \(malformed.prefix(500))")
    }

    /// A pcap header and a packet record that promises 100 bytes and holds 3.
    static let truncatedCapture: [UInt8] = {
        let fileHeader: [UInt8] = [0xd4, 0xc3, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00] + [UInt8](repeating: 0, count: 16)
        let linkType: [UInt8] = [0x65, 0, 0, 0]
        let record: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 0, 1, 2, 3]
        return fileHeader + linkType + record
    }()

    @Test(
        "a garbage capture, a truncated one and a missing one exit 2 with the file and offset",
        arguments: [
            ("garbage", Array("this is not a capture at all, just text".utf8)),
            ("truncated", CaptureAuditTests.truncatedCapture),
        ]
    )
    func badCaptures(name: String, bytes: [UInt8]) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(name)-\(UUID().uuidString).pcap").path
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await ChaosCLI.run(["audit", path, "--out", path + "-report"])
        #expect(result.status == 2, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("capture \(path)"), "\(result.stderr)")
        #expect(result.stderr.contains("offset"), "\(result.stderr)")
    }
}
