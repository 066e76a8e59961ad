import ChaosCore
import Foundation
import Testing

@testable import ChaosProxy

/// Bytes a peer sends into a cut connection before it learns of the cut are acknowledged by the proxy's TCP, as a
/// capture of the leg (tcpdump's too) shows, and go nowhere. The audit must count them sent and never delivered: a
/// producer that trusts TCP and never sends them again lost them (a fresh-clone run's tcpdump audit counted such a
/// message lost where the live audit, which never saw it, did not).
@Suite("A cut leg's late bytes are recorded, never passed on", .serialized, .timeLimit(.minutes(2)))
struct CutReadsTests {
    /// The events of `connection` in order, as (read side and bytes) or (close side and kind).
    static func story(_ events: [TrafficEvent], side: Side) -> [String] {
        events.compactMap { event in
            switch event.kind {
            case .read(side, let bytes): "read \(String(decoding: bytes, as: UTF8.self))"
            case .closed(side, let kind): "closed \(kind.rawValue)"
            default: nil
            }
        }
    }

    @Test("a FIN cut: what the client sends after it, before its own FIN, is read and recorded before its end", arguments: [true, false])
    func finCut(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        try await harness.waitForConnections(1)
        try await offPool {
            try client.sendAll(Array("before\n".utf8))
            #expect(server.receive(exactly: 7) == Array("before\n".utf8))
        }
        _ = await harness.proxy.disconnect(nil, mode: .close, linger: .seconds(Int64(1)))
        try await offPool {
            #expect(client.receiveUntilEnd().1 == .eof, "the proxy's FIN")
            try client.sendAll(Array("late\n".utf8))  // its write side is still open: TCP takes it
            client.shutdownWrite()
            #expect(server.receiveUntilEnd() == ([], .eof), "nothing passes a cut")
        }
        try await waitUntil("the client leg's end is recorded") { harness.events.closes(.client).contains(.cutByFault) }
        #expect(
            Self.story(harness.events.all, side: .client) == ["read before\n", "read late\n", "closed cut-by-fault"],
            "epoll relay: \(epollRelay)"
        )
        client.close()
        server.close()
        await harness.shutdown()
    }

    @Test("a one-sided cut: what the half-open leg's peer sends is recorded until the linger resets it", arguments: [true, false])
    func halfOpenLeg(epollRelay: Bool) async throws {
        // The server must send before the linger (800 ms, real time) resets its leg: an attempt whose thread a loaded
        // machine held past half of it proves nothing, and is tried again (at most 5 times).
        _ = try await firstAttemptInTime(window: "half the linger") { try await Self.sendIntoHalfOpenLeg(epollRelay: epollRelay) ? true : nil }
    }

    /// One attempt of ``halfOpenLeg(epollRelay:)``; false when the server's bytes went out past half the linger.
    static func sendIntoHalfOpenLeg(epollRelay: Bool) async throws -> Bool {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        defer {
            client.close()
            server.close()
        }
        try await harness.waitForConnections(1)
        let cutAt = ContinuousClock.now
        _ = await harness.proxy.disconnect(nil, mode: .clientOnly, linger: .milliseconds(800))
        let inTime = try await offPool { () throws -> Bool in
            #expect(client.receiveUntilEnd().1 == .error(ECONNRESET))
            try? server.sendAll(Array("into the void\n".utf8))
            guard ContinuousClock.now - cutAt < .milliseconds(400) else { return false }
            #expect(server.receiveUntilEnd().1 == .error(ECONNRESET), "the linger's reset")
            return true
        }
        guard inTime else {
            await harness.shutdown()
            return false
        }
        try await waitUntil("the server leg's end is recorded") { !harness.events.closes(.server).isEmpty }
        #expect(Self.story(harness.events.all, side: .server) == ["read into the void\n", "closed reset-by-fault"], "epoll relay: \(epollRelay)")
        await harness.shutdown()
        return true
    }

    @Test(
        "a reset cut: what the server's leg held unread (the proxy had stopped reading it: the client read nothing) is read and recorded before its end, every byte the proxy's TCP acknowledged to the server (a fresh-clone run, s67: a server's message in the proxy's receive queue as a disconnect reset the leg, sent on the wire, never in the live audit)",
        arguments: [true, false]
    )
    func resetCutReadsWhatTheLegHeld(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        let (client, server) = try await offPool { try harness.connectPair() }
        defer {
            client.close()
            server.close()
        }
        try await harness.waitForConnections(1)
        // The server writes until its kernel takes no more (the client reads nothing: the proxy stops reading the
        // server's leg, whose socket then holds what the proxy's TCP acknowledged), at most 64 MiB.
        let written = try await offPool { try Self.writeUntilBlocked(server, limit: 64 << 20) }
        let acknowledged = try #require(TCPCounters(socket: server.fd)?.acknowledged)
        let readBefore = Self.bytesRead(harness.events.all, from: .server)
        try #require(
            readBefore < Int(acknowledged),
            "the server's leg must hold bytes the proxy has not read (read \(readBefore) of \(acknowledged) acknowledged, \(written) written)"
        )
        _ = await harness.proxy.disconnect(nil, mode: .reset, linger: .seconds(Int64(1)))
        try await waitUntil("the server leg's end is recorded") { !harness.events.closes(.server).isEmpty }
        let acknowledgedAtReset = try #require(TCPCounters(socket: server.fd)?.acknowledged)
        #expect(
            Self.bytesRead(harness.events.all, from: .server) == Int(acknowledgedAtReset),
            "every byte the proxy's TCP acknowledged is recorded read (\(readBefore) read before the cut; epoll relay: \(epollRelay))"
        )
        #expect(harness.events.closes(.server) == [.resetByFault])
        await harness.shutdown()
    }

    /// Bytes the proxy recorded read from `side`.
    static func bytesRead(_ events: [TrafficEvent], from side: Side) -> Int {
        events.reduce(0) { total, event in
            guard case .read(side, let bytes) = event.kind else { return total }
            return total + bytes.count
        }
    }

    /// Writes to `socket` without blocking until it has taken nothing for 300 ms (or `limit` bytes went); returns the
    /// bytes it took.
    static func writeUntilBlocked(_ socket: TestSocket, limit: Int) throws -> Int {
        let chunk = [UInt8](repeating: 0x61, count: 65536)
        var written = 0
        var idle = 0
        while written < limit, idle < 15 {
            let n = chunk.withUnsafeBytes { send(socket.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n > 0 {
                written += n
                idle = 0
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                idle += 1
                usleep(20_000)
            } else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }
        return written
    }
}
