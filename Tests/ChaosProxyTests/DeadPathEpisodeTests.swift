import ChaosCore
import Foundation
import Testing

@testable import ChaosProxy

/// What each end's TCP met while a connection's path was dead, as the proxy reports it to the audit
/// (``ChaosCore/DeadPathSeen``): on real sockets through the proxy, a partition, bytes written into it, its end.
@Suite("Dead path: what each end's TCP met", .timeLimit(.minutes(1)))
struct DeadPathEpisodeTests {
    @Test("a partition's end reports what the client sent into it, the proxy's retransmissions, and that nobody closed")
    func partitionReportsEachEnd() async throws {
        let harness = try await ProxyHarness()
        let key = ShapingKey(occurrence: 1)
        let (client, server) = try await offPool { try harness.connectPair() }
        try await offPool {
            try client.sendAll(Array("before\n".utf8))
            _ = server.receive(exactly: 7)
        }
        // The partition lasts no longer than from before it was added to after it was removed, however long a loaded
        // machine takes over the steps between (s80q2: over 5 s, which this test once took for an upper bound).
        let began = ContinuousClock.now
        await harness.proxy.addShaping(.partition(direction: .both), key: key, to: nil)
        try await offPool {
            try client.sendAll([UInt8](repeating: 1, count: 5_000))
            try server.sendAll([UInt8](repeating: 2, count: 3_000))
            usleep(700_000)  // past the first retransmission timeouts (200 ms, then 400 ms)
        }
        await harness.proxy.removeShaping(key: key)
        let window = ContinuousClock.now - began
        let seen = harness.events.all.compactMap { event -> DeadPathSeen? in
            if case .path(.deadPathSeen(let seen)) = event.kind { seen } else { nil }
        }
        try #require(seen.count == 1, "\(harness.events.all.map(\.kind))")
        let episode = seen[0]
        let windowNanoseconds = window.components.seconds * 1_000_000_000 + window.components.attoseconds / 1_000_000_000
        #expect(episode.lasted > 600_000_000 && episode.lasted <= windowNanoseconds, "lasted \(episode.lasted) ns of \(window)")
        #expect(episode.client.sent == 5_000, "the client's bytes reached the proxy's kernel: \(episode)")
        #expect(episode.server.sent == 3_000, "\(episode)")
        #expect(episode.client.closedAfter == nil && episode.server.closedAfter == nil)
        if episode.inKernel {
            // Nothing the proxy sent them reached them; the kernel path is chaos's own only as root.
            #expect(episode.client.acknowledged == 0 && episode.server.acknowledged == 0, "\(episode)")
        }
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test("a NAT that forgot the connection: the client that resets it gave up first, and what it sent into the dead mapping is reported")
    func natDeathReportsWhoGaveUp() async throws {
        let harness = try await ProxyHarness()
        await harness.proxy.addShaping(.nat(idleTimeout: .milliseconds(300)), key: ShapingKey(occurrence: 1), to: nil)
        let (client, server) = try await offPool { try harness.connectPair() }
        try await offPool {
            try client.sendAll(Array("before\n".utf8))
            _ = server.receive(exactly: 7)
            usleep(600_000)  // idle past the NAT's timeout: it forgets the mapping
            try client.sendAll([UInt8](repeating: 1, count: 2_000))
            usleep(500_000)
            client.reset()
        }
        let seen = {
            harness.events.all.compactMap { event -> DeadPathSeen? in
                if case .path(.deadPathSeen(let seen)) = event.kind { seen } else { nil }
            }
        }
        // The reset ends the episode once the proxy's loop reads it: waited for, not slept on (s78q1: 200 ms went by
        // in the unit lane, hundreds of tests beside eleven pair lanes on two cores, with the reset unread).
        try await waitUntil("the episode's report, \(harness.events.all.map(\.kind))", seconds: 30) { !seen().isEmpty }
        let episodes = seen()
        try #require(episodes.count == 1, "\(harness.events.all.map(\.kind))")
        #expect(episodes[0].client.closedHow == .reset && episodes[0].client.closedAfter != nil, "\(episodes[0])")
        #expect(episodes[0].server.closedAfter == nil, "the proxy passed the reset on: not the server's doing")
        server.close()
        await harness.shutdown()
    }
}
