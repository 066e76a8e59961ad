import ChaosCore
import Foundation
import Glibc
import Testing

@testable import ChaosProxy

/// Both relays report what each peer's TCP acknowledged, so that the audit's "delivered" means taken by the
/// consumer, not written by the proxy.
@Suite("Relays report the consumer's TCP acknowledgements", .timeLimit(.minutes(5)))
struct AcknowledgementRelayTests {
    func eventually(_ what: String, _ condition: () -> Bool) async throws {
        try await waitUntil(what, condition)
    }

    static func written(_ events: [TrafficEvent], to side: Side) -> Int64 {
        events.reduce(0) { total, event in
            if case .written(side, let bytes) = event.kind { total + Int64(bytes.count) } else { total }
        }
    }

    static func acknowledged(_ events: [TrafficEvent], by side: Side) -> Int64 {
        events.reduce(0) { last, event in
            if case .acknowledged(side, let offset) = event.kind {
                #expect(offset >= last, "acknowledgements only grow")
                return offset
            }
            return last
        }
    }

    @Test("bytes written to a peer that already closed its socket are never acknowledged", arguments: [true, false])
    func closedPeerNeverAcknowledges(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        try await offPool {
            try server.sendAll(Array("world!".utf8))
            #expect(client.receive(exactly: 6) == Array("world!".utf8))
        }
        try await eventually("the client's acknowledgement of 6 bytes") { Self.acknowledged(harness.events.all, by: .client) == 6 }
        client.close()  // the client is gone: its kernel answers what comes next with a reset
        try await eventually("the client's FIN reached the server") { harness.events.closes(.client).contains(.fin) }
        try await offPool {
            for _ in 0..<20 {
                guard (try? server.sendAll(Array(repeating: UInt8(ascii: "x"), count: 1000))) != nil else { break }
                usleep(2000)
            }
        }
        try await eventually("the proxy wrote late bytes to the client") { Self.written(harness.events.all, to: .client) > 6 }
        try await Task.sleep(nanoseconds: 100_000_000)  // many acknowledgement polls
        let events = harness.events.all
        #expect(Self.written(events, to: .client) > 6, "the proxy wrote the late bytes")
        #expect(Self.acknowledged(events, by: .client) == 6, "only what the client read before closing was acknowledged")
        #expect(Self.cuts(events, to: .client).isEmpty, "a peer that had sent FIN read nothing after it: no cut")
        server.close()
        await harness.shutdown()
    }

    static func cuts(_ events: [TrafficEvent], to side: Side) -> [Int64] {
        events.compactMap { event in
            if case .path(.acknowledgementsCut(side, let upTo)) = event.kind { upTo } else { nil }
        }
    }

    /// A consumer that read what came and reset before its delayed ACK went out (it closed its socket with later bytes
    /// unread, as a Socket.IO client on its ping timeout): the relay says what went out to it unacknowledged is cut
    /// from its acknowledgements (the audit: unconfirmed, not lost), whenever the relay reads the reset (the kernel's
    /// count of bytes sent outlives it). An attempt whose ACK went out before the reset (a CPU hog delayed the test's
    /// thread past 40 ms) proves nothing and is tried again, at most ten times.
    @Test("a peer that resets with no FIN first, past its last acknowledgement: what went out to it is cut", arguments: [true, false])
    func peerResetCutsAcknowledgements(epollRelay: Bool) async throws {
        var conclusive = 0
        for _ in 0..<10 where conclusive == 0 {
            let harness = try await ProxyHarness(epollRelay: epollRelay)
            let (client, server) = try await offPool { try harness.connectPair() }
            client.delayAcknowledgements()
            try await offPool {
                try server.sendAll(Array("one\n".utf8))
                #expect(client.receive(exactly: 4) == Array("one\n".utf8))
                client.reset()  // at once, on the same thread: before its delayed ACK (40 ms) goes out
            }
            try await eventually("the client's reset reached the proxy") { harness.events.closes(.client).contains(.reset) }
            let events = harness.events.all
            if Self.acknowledged(events, by: .client) < 4 {
                conclusive += 1
                #expect(Self.cuts(events, to: .client) == [4], "\(events.map(\.kind))")
            }
            server.close()
            await harness.shutdown()
        }
        #expect(conclusive == 1, "an attempt whose delayed ACK had not gone out when the client reset")
    }

    /// A consumer that reads a message and answers at once (its delayed ACK riding on the answer): the relay records
    /// the acknowledgement of what it read before the answer, never after (a WebSocket client's close frame read before
    /// the polled acknowledgement of the message it had read first made that message "taken after close": a naive
    /// WebSocket run, s68). Without a poll before the read, the acknowledgement waits for the next poll.
    @Test("a peer's acknowledgement of what it read is recorded before what it wrote after reading it", arguments: [true, false])
    func acknowledgementBeforeTheAnswer(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        client.delayAcknowledgements()
        try await offPool {
            try server.sendAll(Array("message\n".utf8))
            #expect(client.receive(exactly: 8) == Array("message\n".utf8))
            try client.sendAll(Array("close\n".utf8))  // at once: the ACK of the message rides on it
            #expect(server.receive(exactly: 6) == Array("close\n".utf8))
        }
        let events = harness.events.all
        let read = events.firstIndex { if case .read(.client, _) = $0.kind { true } else { false } }
        let acknowledged = events.firstIndex { if case .acknowledged(.client, let upTo) = $0.kind { upTo >= 8 } else { false } }
        #expect(
            acknowledged != nil && read != nil && acknowledged! < read!,
            "the acknowledgement of 8 bytes (event \(acknowledged.map(String.init) ?? "none")) comes before the read of the answer (event \(read.map(String.init) ?? "none")); epoll relay: \(epollRelay)"
        )
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test("a reader that does not read holds the acknowledgements back until it does", arguments: [true, false])
    func slowReader(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        let size = 8 << 20
        let payload = pattern(count: size, seed: 9)
        Thread.detachNewThread { try? server.sendAll(payload) }
        try await eventually("the proxy wrote what the client's buffers take") { Self.written(harness.events.all, to: .client) > 64 << 10 }
        try await Task.sleep(nanoseconds: 200_000_000)
        let before = harness.events.all
        #expect(Self.acknowledged(before, by: .client) < Int64(size), "the client has not read: not everything is acknowledged")
        let received = try await offPool { client.receive(exactly: size) }
        #expect(received.count == size)
        try await eventually("every byte acknowledged once read") { Self.acknowledged(harness.events.all, by: .client) == Int64(size) }
        client.close()
        server.close()
        await harness.shutdown()
    }
}
