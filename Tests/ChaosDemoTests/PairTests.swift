import ChaosCore
import ChaosDemo
import Foundation
import Testing

@Suite("The reference pair over real sockets", .serialized, .timeLimit(.minutes(5)))
struct PairTests {
    @Test(
        "the resilient client and server exchange messages both ways, each processed exactly once in order (TCP, WebSocket, gRPC)",
        arguments: DemoTransport.allCases
    )
    func exchange(transport: DemoTransport) async throws {
        let pair = try await PairHarness.start(transport: transport)
        defer { pair.removeFiles() }
        let client = pair.client(port: pair.serverPort)
        try await client.start()
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= 40 })
        #expect(await eventually(within: 10) { await pair.server.status(ofStream: "c1")?.lastProcessedUp ?? 0 >= 40 })
        await client.stop()
        await pair.server.stop()

        let down = try GroundTruth(path: pair.clientLog)
        let up = try GroundTruth(path: pair.serverLog)
        #expect(down.seqs("c1").count >= 40 && down.isExactlyOnceInOrder("c1"))
        #expect(up.seqs("c1").count >= 40 && up.isExactlyOnceInOrder("c1"))
    }

    @Test(
        "after connections are reset mid-stream the client reconnects within its first jittered backoff and resumes with no loss and no duplicate (TCP, WebSocket, gRPC)",
        arguments: DemoTransport.allCases
    )
    func resetResume(transport: DemoTransport) async throws {
        let pair = try await PairHarness.start(rate: 200, transport: transport)
        defer { pair.removeFiles() }
        let relay = TestRelay(upstreamPort: pair.serverPort)
        let client = pair.client(port: try await relay.start(), rate: 200)
        try await client.start()
        for round in 1...3 {
            let before = await client.status().lastProcessedDown
            #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= before + 30 })
            try await relay.cutAll()
            #expect(await eventually(within: 10) { await client.status().connectionsResumed > round })
        }
        let last = await client.status().lastProcessedDown
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= last + 30 })
        #expect(await eventually(within: 10) { await pair.server.status(ofStream: "c1")?.lastProcessedUp ?? 0 >= 120 })
        let status = await client.status()
        await client.stop()
        await pair.server.stop()
        await relay.stop()

        // Three cuts, three disconnects; over gRPC the transport names a cut as it sees it (a reset, or the stream's
        // end when the reset came while it was between reads: a fresh-clone run counted 2 resets of 3 cuts).
        if transport == .grpc {
            #expect(status.disconnects.values.reduce(0, +) >= 3, "\(status.disconnects)")
        } else {
            #expect(status.disconnects[.reset, default: 0] >= 3, "\(status.disconnects)")
        }
        // Each was the first retry after a reset: full jitter within the first window (500 ms). Over gRPC the transport
        // reconnects its own connection, and a call placed while it notices the reset can fail once more (then backs
        // off into the next window).
        let window = ChaosDuration.milliseconds(500)
        if transport == .grpc {
            #expect(status.reconnectDelays.first.map { $0 <= window } == true, "\(status.reconnectDelays) \(status.disconnects)")
        } else {
            #expect(status.reconnectDelays.allSatisfy { $0 <= window }, "\(status.reconnectDelays) \(status.disconnects)")
        }
        let down = try GroundTruth(path: pair.clientLog)
        let up = try GroundTruth(path: pair.serverLog)
        #expect(down.isExactlyOnceInOrder("c1") && down.seqs("c1").count >= 120)
        #expect(up.isExactlyOnceInOrder("c1") && up.seqs("c1").count >= 100)
        #expect(up.events(named: "resumed").count >= 4)
    }

    @Test(
        "a half-open connection is noticed by the heartbeat (a WebSocket ping, an HTTP/2 keepalive PING) within interval + timeout and the stream resumes intact",
        arguments: DemoTransport.allCases
    )
    func halfOpenDetected(transport: DemoTransport) async throws {
        let pair = try await PairHarness.start(transport: transport)
        defer { pair.removeFiles() }
        let relay = TestRelay(upstreamPort: pair.serverPort)
        let client = pair.client(port: try await relay.start())
        try await client.start()
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= 20 })
        try await relay.blackhole()
        let partitioned = ContinuousClock.now
        let starvation = StarvationProbe()
        let noticed = await eventually(within: 5) { await client.status().disconnects[.heartbeatTimeout, default: 0] >= 1 }
        let detection = ContinuousClock.now - partitioned
        let starved = starvation.stop()
        #expect(noticed)
        // Interval 200 ms + timeout 400 ms; three times that leaves room for a loaded machine, and is still far below
        // anything but the heartbeat (a blackholed TCP connection never notices on its own). Plus the time this process
        // waited for a CPU meanwhile (s77q2, a quiet machine's fresh clone: noticed after 3.25 s over gRPC, the unit
        // lane niced beside eleven pair lanes).
        #expect(detection <= .milliseconds(3 * 600) + starved, "noticed after \(detection), the process starved \(starved) meanwhile")
        let stalledAt = await client.status().lastProcessedDown
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= stalledAt + 30 })
        await client.stop()
        await pair.server.stop()
        await relay.stop()

        let down = try GroundTruth(path: pair.clientLog)
        let up = try GroundTruth(path: pair.serverLog)
        #expect(down.isExactlyOnceInOrder("c1"))
        #expect(up.isExactlyOnceInOrder("c1"))
        #expect(!up.events(named: "takeover").isEmpty || !up.events(named: "idle-timeout").isEmpty)
    }

    @Test(
        "a WebSocket upgrade caught by a dead path is given up after the heartbeat timeout and tried again (the heartbeat only starts once the WebSocket is up)"
    )
    func deadUpgradeIsAbandoned() async throws {
        let pair = try await PairHarness.start(transport: .websocket)
        defer { pair.removeFiles() }
        let relay = TestRelay(upstreamPort: pair.serverPort)
        let port = try await relay.start()
        try await relay.blackhole(newConnections: true)
        let client = pair.client(port: port)
        try await client.start()
        // Timeout 400 ms and a backoff of at most 500 ms: a few attempts in 4 s; without the timeout, one forever.
        let retried = await eventually(within: 4) { (try? await relay.acceptedCount()) ?? 0 >= 3 }
        let accepted = (try? await relay.acceptedCount()) ?? -1
        #expect(retried, "connections the relay accepted: \(accepted)")
        try await relay.heal()
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= 20 }, "the stream flows once the path heals")
        await client.stop()
        await pair.server.stop()
        await relay.stop()
    }

    @Test("the naive client loses what was in flight when the connection died: its log and the server's have holes")
    func naiveLoses() async throws {
        let pair = try await PairHarness.start()
        defer { pair.removeFiles() }
        let relay = TestRelay(upstreamPort: pair.serverPort)
        let client = pair.client(port: try await relay.start(), naive: true)
        try await client.start()
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= 20 })
        let upBefore = await client.status().lastAssignedUp
        let downBefore = await pair.server.status(ofStream: "c1")?.lastAssignedDown ?? 0
        try await relay.blackhole()  // messages sent now go nowhere…
        // Twelve each way at least, however slowly a loaded machine runs the pair (not a fixed time: 300 ms gave 5).
        #expect(
            await eventually(within: 10) {
                let down = await pair.server.status(ofStream: "c1")?.lastAssignedDown ?? 0
                return await client.status().lastAssignedUp >= upBefore + 12 && down >= downBefore + 12
            }
        )
        try await relay.cutAll()  // …and the naive pair never asks for them again
        let after = await client.status().lastProcessedDown
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= after + 30 })
        let status = await client.status()
        await client.stop()
        await pair.server.stop()
        await relay.stop()

        #expect(status.disconnects[.heartbeatTimeout, default: 0] == 0)  // no heartbeat at all
        #expect(status.reconnectDelays.allSatisfy { $0 == .zero })
        let down = try GroundTruth(path: pair.clientLog)
        let up = try GroundTruth(path: pair.serverLog)
        #expect(down.holes("c1").count >= 10)
        #expect(up.holes("c1").count >= 10)
        #expect(up.events(named: "fresh").count >= 2)
        #expect(up.events(named: "resumed").isEmpty)
    }

    @Test("each side logs, as it stops, the seqs it still holds unacknowledged: every seq the other side never processed")
    func stopLogsUnacknowledged() async throws {
        let pair = try await PairHarness.start()
        defer { pair.removeFiles() }
        let relay = TestRelay(upstreamPort: pair.serverPort)
        let client = pair.client(port: try await relay.start(), heartbeat: .seconds(Int64(30)), heartbeatTimeout: .seconds(Int64(30)))
        try await client.start()
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= 5 })
        try await relay.blackhole(newConnections: true)  // from now on nothing arrives and nothing is acknowledged
        let upBefore = await client.status().lastAssignedUp
        let downBefore = await pair.server.status(ofStream: "c1")?.lastAssignedDown ?? 0
        #expect(
            await eventually(within: 10) {
                let down = await pair.server.status(ofStream: "c1")?.lastAssignedDown ?? 0
                return await client.status().lastAssignedUp >= upBefore + 6 && down >= downBefore + 6
            }
        )
        // Each side's last assigned seq once it stopped: a server still running assigns more (seen: 17 assigned and
        // held at its stop, after 16 read while it ran).
        await client.stop()
        let assignedUp = await client.status().lastAssignedUp
        await pair.server.stop()
        let assignedDown = await pair.server.status(ofStream: "c1")?.lastAssignedDown ?? 0
        await relay.stop()

        for (producer, consumer, direction, assigned) in [
            (pair.clientLog, pair.serverLog, "up", assignedUp), (pair.serverLog, pair.clientLog, "down", assignedDown),
        ] {
            var held = Set<Int>()
            for line in try GroundTruth(path: producer).events(named: "unacknowledged") where line["dir"] as? String == direction {
                let from = try #require(line["from"] as? Int)
                let to = try #require(line["to"] as? Int)
                #expect(line["stream"] as? String == "c1" && from <= to && held.isDisjoint(with: from...to), "\(line)")
                held.formUnion(from...to)
            }
            let processed = Set(try GroundTruth(path: consumer).seqs("c1"))
            let undelivered = Set(1...assigned).subtracting(processed)
            #expect(undelivered.count >= 6, "\(direction): the partition held back six at least")
            #expect(held.isSuperset(of: undelivered) && held.isSubset(of: 1...assigned), "\(direction): \(held.sorted()) \(undelivered.sorted())")
        }
    }

    @Test("a restarted client resumes from its state file: the downstream continues with no loss and no duplicate")
    func restartResumes() async throws {
        let pair = try await PairHarness.start()
        defer { pair.removeFiles() }
        let first = pair.client(port: pair.serverPort)
        try await first.start()
        #expect(await eventually(within: 10) { await first.status().lastProcessedDown >= 30 })
        await first.stop()
        let stoppedAt = try GroundTruth(path: pair.clientLog).seqs("c1").last ?? 0

        let second = pair.client(port: pair.serverPort)
        try await second.start()
        #expect(await eventually(within: 10) { await second.status().lastProcessedDown >= stoppedAt + 30 })
        let secondStatus = await second.status()
        await second.stop()
        await pair.server.stop()

        let down = try GroundTruth(path: pair.clientLog)
        #expect(down.events(named: "restored").count == 1)
        #expect(down.isExactlyOnceInOrder("c1"))  // both runs appended to one log: 1…n, once each
        #expect(down.seqs("c1").contains(stoppedAt + 1))
        // Upstream numbering continued instead of restarting at 1 (which the server would drop as duplicates).
        let up = try GroundTruth(path: pair.serverLog)
        #expect(secondStatus.lastAssignedUp > 30)
        #expect(Set(up.seqs("c1")).count == up.seqs("c1").count)
        #expect((up.seqs("c1").last ?? 0) > 30)
    }

    @Test(
        "--send-for: after it both sides produce nothing new and keep the stream (heartbeats, acknowledgements), so nothing is in flight when the pair stops (TCP, WebSocket)",
        arguments: [DemoTransport.tcp, .websocket]
    )
    func sendForQuietEnd(transport: DemoTransport) async throws {
        let quietAfter = ChaosDuration.milliseconds(800)
        // Heartbeats every 200 ms as elsewhere, but a timeout no starved test process reaches (a CPU hog beside the niced
        // unit lane held this one past the harness's 400 ms, and it reconnected): the test is the quiet, not the timeout.
        let patient = ChaosDuration.seconds(Int64(10))
        let pair = try await PairHarness.start(rate: 100, heartbeatTimeout: patient, transport: transport, sendFor: quietAfter)
        defer { pair.removeFiles() }
        let client = pair.client(port: pair.serverPort, rate: 100, heartbeatTimeout: patient, sendFor: quietAfter)
        try await client.start()
        #expect(await eventually(within: 10) { await client.status().lastProcessedDown >= 5 })
        // Past the quiet's start, everything produced is processed and acknowledged; a second later nothing has moved
        // and the one connection is still up (its heartbeats answered).
        try await Task.sleep(nanoseconds: 1_500_000_000)
        #expect(
            await eventually(within: 10) {
                let status = await client.status()
                let server = await pair.server.status(ofStream: "c1")
                return status.unacknowledgedUp == 0 && server?.unacknowledgedDown == 0
                    && server?.lastProcessedUp == status.lastAssignedUp && server?.lastAssignedDown == status.lastProcessedDown
            }
        )
        let before = await client.status()
        let serverBefore = await pair.server.status(ofStream: "c1")
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let after = await client.status()
        let serverAfter = await pair.server.status(ofStream: "c1")
        #expect(before.lastAssignedUp > 0 && before.lastProcessedDown > 0)
        #expect(after.lastAssignedUp == before.lastAssignedUp && after.lastProcessedDown == before.lastProcessedDown)
        #expect(serverAfter?.lastAssignedDown == serverBefore?.lastAssignedDown && serverAfter?.attached == true)
        #expect(after.connectionsOpened == 1 && after.established)
        await client.stop()
        await pair.server.stop()
        let down = try GroundTruth(path: pair.clientLog)
        let up = try GroundTruth(path: pair.serverLog)
        #expect(down.isExactlyOnceInOrder("c1") && down.seqs("c1").count == after.lastProcessedDown)
        #expect(up.isExactlyOnceInOrder("c1") && up.seqs("c1").count == after.lastAssignedUp)
    }

    @Test("a full send queue drops its oldest messages behind an explicit GAP marker that the server records")
    func queueOverflowGap() async throws {
        let pair = try await PairHarness.start(rate: 0)
        defer { pair.removeFiles() }
        let relay = TestRelay(upstreamPort: pair.serverPort)
        let relayPort = try await relay.start()
        try await relay.blackhole(newConnections: true)  // nothing gets through: no WELCOME, no ACK
        let client = pair.client(
            port: relayPort,
            rate: 200,
            queueCapacity: 5,
            heartbeat: .seconds(Int64(5)),
            heartbeatTimeout: .seconds(Int64(5))
        )
        try await client.start()
        #expect(await eventually(within: 10) { await client.status().lastAssignedUp >= 30 })
        try await relay.heal()
        try await relay.cutAll()
        #expect(await eventually(within: 10) { await pair.server.status(ofStream: "c1")?.lastProcessedUp ?? 0 >= 40 })
        await client.stop()
        await pair.server.stop()
        await relay.stop()

        let sent = try GroundTruth(path: pair.clientLog).events(named: "gap-sent")
        #expect(!sent.isEmpty)
        let up = try GroundTruth(path: pair.serverLog)
        let received = up.events(named: "gap-received")
        let firstGap = try #require(received.first)
        #expect(firstGap["from"] as? Int == 1)
        // Processed seqs and announced gaps together cover 1…n, each seq once.
        var covered = up.seqs("c1")
        for gap in received {
            if let from = gap["from"] as? Int, let to = gap["to"] as? Int { covered += Array(from...to) }
        }
        #expect(covered.sorted() == Array(1...covered.count))
        #expect(up.seqs("c1").count >= 5)
    }
}
