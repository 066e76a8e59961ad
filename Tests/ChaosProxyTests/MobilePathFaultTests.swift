import ChaosCore
import Foundation
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// The mobile path's faults on real sockets: a carrier NAT that forgets idle connections, the radio's promotion, and
/// a handoff whose dead WiFi hangs connections and whose new address the server sees.
@Suite("Mobile path faults on real sockets", .serialized, .timeLimit(.minutes(5)))
struct MobilePathFaultTests {
    @Test(
        "a NAT-dead connection passes nothing either way while ss shows both legs ESTABLISHED; a keepalive shorter than the timeout keeps its connection"
    )
    func natKillsIdleConnectionsSilently() async throws {
        let harness = try await ProxyHarness()
        let timeout: Int64 = 2_000_000_000
        try await offPool {
            let (client, server) = try harness.connectPair()
            let (kept, keptServer) = try harness.connectPair()
            // Both connections work before the NAT begins; from then on the first says nothing.
            try client.sendAll(Array("hello".utf8))
            #expect(server.receive(exactly: 5) == Array("hello".utf8))
            let natBegan = harness.proxy.clock.now()
            try blockingAwait { await harness.proxy.addShaping(.nat(idleTimeout: .nanoseconds(timeout)), key: ShapingKey(occurrence: 1), to: nil) }
            // The second connection sends a keepalive every 150 ms for 2.4 s, longer than the timeout; the first says
            // nothing for as long.
            var beatsPassed = 0
            for beat in 0..<16 {
                try kept.sendAll([UInt8(beat)])
                guard keptServer.receive(exactly: 1) == [UInt8(beat)] else { break }
                beatsPassed += 1
                Thread.sleep(forTimeInterval: 0.15)
            }
            try keptServer.sendAll(Array("still here".utf8))
            let stillHere = kept.receive(exactly: 10) == Array("still here".utf8)
            // The quiet one is dead: nothing passes either way, and nobody is told.
            try client.sendAll(Array("anyone?".utf8))
            try server.sendAll(Array("ping".utf8))
            client.setTimeout(0.7)
            server.setTimeout(0.7)
            #expect(server.receive() == .error(EAGAIN), "a byte crossed a dead NAT mapping upstream")
            #expect(client.receive() == .error(EAGAIN), "a byte crossed a dead NAT mapping downstream")
            let legs = try FaultTests().establishedLegs([
                (client.localPort, harness.port), (server.peerPort, harness.upstream.port),
                (kept.localPort, harness.port), (keptServer.peerPort, harness.upstream.port),
            ])
            #expect(legs == [2, 2, 2, 2], "every leg stays ESTABLISHED: \(legs)")
            // Lifting the fault does not bring it back.
            try blockingAwait { await harness.proxy.removeShaping(key: ShapingKey(occurrence: 1)) }
            try client.sendAll(Array("hello?".utf8))
            #expect(server.receive() == .error(EAGAIN))
            // The NAT judges idleness by when the proxy read each byte. The keepalive kept its connection unless the
            // proxy itself read nothing of it for the timeout (a loop starved that long on a loaded machine, as the
            // unit lane is niced beside a CPU hog): then its death is the NAT's rule applied, and the keepalive's
            // claim is left to the virtual-time test (MobilePathShaperTests); the quiet connection dies either way.
            let events = harness.events.all
            let keptID = events.first { event in
                if case .read(.client, let bytes) = event.kind { bytes == [0] } else { false }
            }?.connection
            let keptReads = events.filter { event in
                guard event.connection == keptID, event.time >= natBegan else { return false }
                if case .read = event.kind { return true }
                return false
            }.map(\.time)
            let longestGap = zip([natBegan] + keptReads, keptReads).map { $1 - $0 }.max() ?? .max
            let deaths = events.filter { if case .path(.natExpired) = $0.kind { true } else { false } }
            let keptDied = deaths.contains { $0.connection == keptID }
            if longestGap < timeout - 100_000_000 {
                #expect(
                    beatsPassed == 16 && stillHere && !keptDied,
                    "the kept-alive connection lives: \(beatsPassed) beats, gaps under \(longestGap / 1_000_000) ms"
                )
            } else {
                #expect(
                    !stillHere || !keptDied,
                    "a dead connection passed nothing: \(beatsPassed) beats, the proxy read nothing for \(longestGap / 1_000_000) ms"
                )
            }
            #expect(deaths.contains { $0.connection != keptID }, "the quiet connection died: \(deaths)")
            #expect(deaths.count <= 2, "\(deaths)")
            for socket in [client, server, kept, keptServer] { socket.close() }
        }
        await harness.shutdown()
    }

    @Test("after the radio's idle tail the next byte waits its promotion; a keepalive shorter than the tail never does")
    func radioPromotionAfterTheTail() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            let tail: UInt64 = 1_200_000_000
            let radio = RadioModel(promotion: .milliseconds(400), tail: .nanoseconds(Int64(tail)))
            try blockingAwait { await harness.proxy.addShaping(.radio(radio), key: ShapingKey(occurrence: 1), to: nil) }
            // Bytes every 200 ms: the radio stays connected, no promotion (unless this thread was held past the tail
            // between two of them, when the radio rightly went idle).
            var longestGap: UInt64 = 0
            var last = DispatchTime.now().uptimeNanoseconds
            for beat in 0..<5 {
                try client.sendAll([UInt8(beat)])
                let now = DispatchTime.now().uptimeNanoseconds
                longestGap = max(longestGap, now - last)
                last = now
                #expect(server.receive(exactly: 1) == [UInt8(beat)])
                Thread.sleep(forTimeInterval: 0.2)
            }
            #expect(promotions(harness).isEmpty || longestGap >= tail, "longest gap \(longestGap / 1_000_000) ms")
            // Quiet past the tail: the next byte (downstream here) waits the promotion, at least 400 ms.
            Thread.sleep(forTimeInterval: 1.6)
            let sent = DispatchTime.now().uptimeNanoseconds
            try server.sendAll(Array("wake".utf8))
            #expect(client.receive(exactly: 4) == Array("wake".utf8))
            #expect(DispatchTime.now().uptimeNanoseconds - sent >= 400_000_000)
            let wakes = promotions(harness)
            #expect(wakes.last == 400_000_000 && (wakes.count == 1 || longestGap >= tail), "\(wakes)")
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    /// Connects through the proxy once it listens again (it binds its socket again a moment after a refusal ends).
    static func connectPair(_ harness: ProxyHarness) throws -> (client: TestSocket, server: TestSocket) {
        for _ in 0..<50 {
            if let client = try? TestSocket.connect(port: harness.port, timeout: 1) {
                return (client, try Self.accept(harness, "the server leg of a new connection"))
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return try harness.connectPair()
    }

    /// The upstream's next connection (at most 10 s); when none comes, an error that names which one (s78q5: an accept
    /// timed out, EAGAIN, and nothing said which step of the handoff it was).
    static func accept(_ harness: ProxyHarness, _ what: String) throws -> TestSocket {
        do {
            return try harness.upstream.accept()
        } catch {
            throw AcceptFailed(what: what, error: error, refusing: harness.proxy.isRefusing, source: harness.proxy.sourceAddress)
        }
    }

    struct AcceptFailed: Error, CustomStringConvertible {
        let what: String
        let error: any Error
        let refusing: Bool
        let source: String?
        var description: String {
            "no \(what) reached the upstream in 10 s (\(error); the proxy refusing: \(refusing), its source address: \(source ?? "none"))"
        }
    }

    /// Connects through the proxy, sends `marker`, and returns the server leg that received it: server legs of
    /// connections that were cut before (still in the upstream's accept queue) are closed and passed over.
    static func connectPair(_ harness: ProxyHarness, saying marker: String) throws -> (client: TestSocket, server: TestSocket) {
        let (client, first) = try connectPair(harness)
        try client.sendAll(Array(marker.utf8))
        var candidate = first
        for _ in 0..<20 {
            candidate.setTimeout(1)
            if candidate.receive(exactly: marker.utf8.count) == Array(marker.utf8) {
                candidate.setTimeout(10)
                return (client, candidate)
            }
            candidate.close()
            candidate = try Self.accept(harness, "the next server leg in the upstream's queue")
        }
        candidate.close()
        Issue.record("no server leg received \(marker) through the proxy")
        throw POSIXError(.ETIMEDOUT)
    }

    private func promotions(_ harness: ProxyHarness) -> [Int64] {
        harness.events.all.compactMap { if case .path(.radioPromotion(let waited)) = $0.kind { waited } else { nil } }
    }

    @Test(
        "a handoff: on the dead WiFi a new connection is accepted and never answered, in the blackout one is refused, after it every old connection's client leg is reset and the server sees new connections from the pool's next address"
    )
    func handoffWithDeadWiFiAndNewAddress() async throws {
        let harness = try await ProxyHarness()
        let handoff = FaultEffect.handoff(
            from: LinkProfile.named("wifi")!,
            to: LinkProfile.named("wifi")!,
            blackout: .milliseconds(1_500),
            linger: .seconds(Int64(1)),
            deadWiFi: .milliseconds(1_500),
            newAddress: ["127.0.0.2", "127.0.0.3"]
        )
        // The injector runs on a clock the test steps through the phases: 0.5 s the dead WiFi, 2 s the blackout, 3.5 s
        // the end (the second handoff: 4.5 s to 7.5 s).
        let clock = SteppedClock()
        let start = ChaosDuration.milliseconds(500)
        let occurrences = [0, 1].map { index in
            FaultOccurrence(
                index: index,
                rule: 0,
                at: start + .seconds(Int64(4 * index)),
                lasts: .seconds(Int64(3)),
                proxy: nil,
                targets: .all,
                seed: 1,
                effect: handoff
            )
        }
        let injector = FaultInjector(
            timeline: Timeline(seed: 1, duration: .seconds(Int64(20)), occurrences: occurrences),
            proxies: [harness.proxy],
            clock: clock,
            sink: harness.events
        )
        let (old, oldServer) = try harness.connectPair()
        #expect(oldServer.peerAddress == "127.0.0.1")
        let running = Task { await injector.run() }
        try await offPool {
            // Dead WiFi (0.5 s to 2 s): a new connection is accepted, and its request never answered.
            clock.advance(to: start.nanoseconds)
            try blockingAwait { try await waitUntil("the dead WiFi began") { injector.appliedSoFar.count == 1 } }
            let hanging = try TestSocket.connect(port: harness.port)
            let hangingServer = try Self.accept(harness, "the server leg of the connection made on the dead WiFi")
            try hanging.sendAll(Array("GET".utf8))
            hangingServer.setTimeout(0.5)
            #expect(hangingServer.receive() == .error(EAGAIN), "a request crossed the dead WiFi")
            // Blackout (2 s to 3.5 s): no network, a connection attempt fails.
            clock.advance(to: (start + .milliseconds(1_500)).nanoseconds)
            try blockingAwait { try await waitUntil("the blackout refuses") { harness.proxy.isRefusing } }
            // The listening socket closes a moment after the refusal begins: a connection may still get in first.
            var early: [TestSocket] = []
            var refused = false
            for _ in 0..<40 where !refused {
                if let got = try? TestSocket.connect(port: harness.port, timeout: 1) { early.append(got) } else { refused = true }
                if !refused { Thread.sleep(forTimeInterval: 0.02) }
            }
            defer { for socket in early { socket.close() } }
            #expect(refused, "a connection attempt in the blackout was refused (\(early.count) got in before the listener closed)")
            // After it: both connections that went the old way are reset on the client side.
            clock.advance(to: (start + .seconds(Int64(3))).nanoseconds)
            try blockingAwait { try await waitUntil("the handoff ended") { !harness.proxy.isRefusing && harness.proxy.sourceAddress != nil } }
            old.setTimeout(5)
            hanging.setTimeout(5)
            #expect(old.receive() == .error(ECONNRESET))
            #expect(hanging.receive() == .error(ECONNRESET))
            // A connection that got in before the listener closed may have left its server leg in the accept queue:
            // the fresh connection's server leg is the one that receives what the fresh client sent.
            let (fresh, freshServer) = try Self.connectPair(harness, saying: "hi")
            #expect(freshServer.peerAddress == "127.0.0.2", "the server sees the client's new address")
            // The next handoff moves on to the pool's next address.
            clock.advance(to: (start + .seconds(Int64(7))).nanoseconds)
            try blockingAwait { try await waitUntil("the second handoff ended") { harness.proxy.sourceAddress == "127.0.0.3" } }
            let (later, laterServer) = try Self.connectPair(harness, saying: "again")
            #expect(laterServer.peerAddress == "127.0.0.3")
            for socket in [old, oldServer, hanging, hangingServer, fresh, freshServer, later, laterServer] { socket.close() }
        }
        running.cancel()
        _ = await running.value
        await harness.shutdown()
    }

    @Test(
        "radio and nat posted to the control API apply at once and list in GET /faults; a NAT posted there forgets an idle connection; bad values are 400 naming the field"
    )
    func throughTheControlAPI() async throws {
        try await withControlAPI { harness, apiPort in
            let (client, server) = try harness.connectPair()
            let (radio, radioBody) = try apiRequest(
                apiPort,
                "POST",
                "/faults",
                body: #"{"radio": {"promotion": "100ms", "tail": "10s", "per": "connection"}}"#
            )
            #expect(radio == 201, "\(radioBody)")
            // The NAT's idle clock starts when it is posted: a byte sent within its second passes. On a machine that
            // holds this thread longer than that between the post and the send, the NAT has rightly forgotten it.
            let idleTimeout: UInt64 = 1_000_000_000
            let posted = DispatchTime.now().uptimeNanoseconds
            let (nat, natBody) = try apiRequest(apiPort, "POST", "/faults", body: #"{"nat": {"idle_timeout": "1s"}}"#)
            #expect(nat == 201, "\(natBody)")
            try client.sendAll([1])
            let quietBeforeSend = DispatchTime.now().uptimeNanoseconds - posted
            let first = server.receive(exactly: 1)
            #expect(first == [1] || quietBeforeSend >= idleTimeout, "\(first), \(quietBeforeSend / 1_000_000) ms after the post")
            let listed = try apiRequest(apiPort, "GET", "/faults").1
            #expect(listed.contains(#"\"nat\""#) && listed.contains(#"\"per\": \"connection\""#), "\(listed)")
            Thread.sleep(forTimeInterval: 1.3)
            try client.sendAll([2])
            server.setTimeout(0.5)
            #expect(server.receive() == .error(EAGAIN), "the NAT forgot the quiet connection")
            for body in [#"{"nat": {"idle_timeout": "0s"}}"#, #"{"radio": {"tail": "0s"}}"#, #"{"handoff": {"new_address": []}}"#] {
                let (status, reason) = try apiRequest(apiPort, "POST", "/faults", body: body)
                #expect(status == 400, "\(body): \(reason)")
            }
            #expect(try apiRequest(apiPort, "DELETE", "/faults").0 == 200)
            client.close()
            server.close()
        }
    }
}
