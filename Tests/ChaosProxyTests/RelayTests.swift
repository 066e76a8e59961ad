import ChaosCore
import Foundation
import NIOCore
import Testing

@testable import ChaosProxy

@Suite("Relay over real sockets", .serialized, .timeLimit(.minutes(5)))
struct RelayTests {
    @Test(
        "with no fault, 50 MB each way arrive unchanged, both directions at once (epoll relay or NIO, sleeping or busy polling)",
        arguments: [true, false],
        [TimeAmount.zero, .microseconds(100)]
    )
    func bytesOutEqualBytesIn(epollRelay: Bool, busyPoll: TimeAmount) async throws {
        let harness = try await ProxyHarness(busyPoll: busyPoll, epollRelay: epollRelay)
        #expect((harness.busyPolling != nil) == (busyPoll > .zero))
        try await offPool {
            let (client, server) = try harness.connectPair()
            let size = 50 * 1024 * 1024
            let up = pattern(count: size, seed: 1)
            let down = pattern(count: size, seed: 2)
            let (serverGot, clientGot) = TwoWayTransfer(client: client, server: server, up: up, down: down).join()
            #expect(serverGot.count == size)
            #expect(clientGot.count == size)
            expectSameBytes(serverGot, up)
            expectSameBytes(clientGot, down)
            #expect(harness.proxy.counters.upstream == Int64(size))
            #expect(harness.proxy.counters.downstream == Int64(size))
            // Nothing shaped it: it stayed where it started.
            #expect(harness.proxy.epollRelayConnections.count == (epollRelay ? 1 : 0))
            client.close()
            server.close()
        }
        // With busy polling on, the NIO relay kept its loops polling after moving bytes.
        if !epollRelay { #expect(harness.busyPolling.map { !$0.lastSpins.isEmpty } ?? true) }
        await harness.shutdown()
    }

    @Test("a client's FIN reaches the server, and the server's reply still reaches the client (epoll relay or NIO)", arguments: [true, false])
    func halfClosePropagates(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try client.sendAll(Array("request".utf8))
            client.shutdownWrite()
            let (request, serverEnd) = server.receiveUntilEnd()
            #expect(request == Array("request".utf8))
            #expect(serverEnd == .eof)
            try server.sendAll(Array("reply after your FIN".utf8))
            server.shutdownWrite()
            let (reply, clientEnd) = client.receiveUntilEnd()
            #expect(String(decoding: reply, as: UTF8.self) == "reply after your FIN")
            #expect(clientEnd == .eof)
            #expect(harness.events.closes(.client).first == .fin)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test(
        "after the client's FIN, a reply larger than the socket buffers arrives whole before the server's FIN (epoll relay or NIO)",
        arguments: [true, false]
    )
    func replyAfterClientFINArrivesWhole(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try client.sendAll(Array("send me everything".utf8))
            client.shutdownWrite()
            #expect(server.receiveUntilEnd().1 == .eof)
            let reply = pattern(count: 4 * 1024 * 1024, seed: 11)
            // The client reads only later: the proxy holds queued writes toward a leg whose input is already
            // closed when the server's FIN arrives; none of them may be dropped.
            let writer = Background { () -> Bool in
                defer { server.shutdownWrite() }
                return (try? server.sendAll(reply)) != nil
            }
            // A slow reader keeps the client's socket full, so writes wait in the proxy when the server's FIN comes.
            var got: [UInt8] = []
            var end = TestSocket.Received.eof
            reading: while true {
                switch client.receive(max: 16384) {
                case .bytes(let chunk):
                    got += chunk
                    usleep(1000)
                case let other:
                    end = other
                    break reading
                }
            }
            #expect(writer.join() == true)
            #expect(end == .eof)
            expectSameBytes(got, reply)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("a server's FIN reaches the client while the client can still send (epoll relay or NIO)", arguments: [true, false])
    func serverHalfClose(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try server.sendAll(Array("bye".utf8))
            server.shutdownWrite()
            let (got, end) = client.receiveUntilEnd()
            #expect(got == Array("bye".utf8))
            #expect(end == .eof)
            try client.sendAll(Array("last words".utf8))
            client.shutdownWrite()
            let (last, serverEnd) = server.receiveUntilEnd()
            #expect(String(decoding: last, as: UTF8.self) == "last words")
            #expect(serverEnd == .eof)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("a reset from one side is passed on as a reset to the other (epoll relay or NIO)", arguments: [true, false])
    func resetPropagates(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            try client.sendAll([1, 2, 3])
            #expect(server.receive(exactly: 3) == [1, 2, 3])
            client.reset()
            let (_, end) = server.receiveUntilEnd()
            #expect(end == .error(ECONNRESET))
            server.close()
        }
        await harness.shutdown()
    }

    @Test("a slow reader slows the writer: the proxy holds a bounded amount (epoll relay or NIO)", arguments: [true, false])
    func backpressureBoundsMemory(epollRelay: Bool) async throws {
        let harness = try await ProxyHarness(baseline: nil, maxHeldBytes: 256 * 1024, epollRelay: epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            client.setTimeout(2)
            // The server never reads: the client's writes must block once the buffers are full.
            let chunk = [UInt8](repeating: 7, count: 64 * 1024)
            var written = 0
            while written < 200 * 1024 * 1024 {
                do { try client.sendAll(chunk) } catch { break }
                written += chunk.count
            }
            #expect(written < 64 * 1024 * 1024, "the writer was not slowed: \(written) bytes accepted")
            let moved = harness.proxy.counters.upstream
            // What crossed the proxy is what the kernel buffers of the server leg hold, not the whole stream.
            #expect(moved < 48 * 1024 * 1024, "proxy read \(moved) bytes for a reader that reads nothing")
            client.reset()
            server.close()
        }
        await harness.shutdown()
    }
}
