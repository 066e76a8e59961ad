import ChaosCore
import ChaosProtocols
import Foundation
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// `ws-close` and `goaway` on real sockets: the proxy's frame goes in between two frames even when the fault
/// comes in the middle of one, and the connection is closed after the grace time.
@Suite("Protocol faults on real sockets: ws-close and goaway at frame boundaries", .serialized, .timeLimit(.minutes(5)))
struct ProtocolFaultTests {
    static let upgradeRequest = Array("GET /s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".utf8)
    static let upgradeResponse = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".utf8)

    /// A server's (unmasked) binary frame with a 16-bit length.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        [0x82, 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)] + payload
    }

    /// A client's masked binary frame.
    static func maskedFrame(_ payload: [UInt8], key: [UInt8] = [1, 2, 3, 4]) -> [UInt8] {
        [0x82, 0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)] + key
            + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    private func fire(_ harness: ProxyHarness, _ fault: ProtocolFault) throws -> Int {
        try blockingAwait { await harness.proxy.protocolClose(nil, fault) }
    }

    /// A `ws-close` with these fields.
    private func wsClose(code: Int64, side: String, grace: String) -> ProtocolFault {
        WebSocketProtocol.faults[0].fault(["code": .integer(code), "side": .text(side), "grace": .text(grace)])
    }

    // The grace is 2 s: the test sends the rest of the frame after the fault fired, and with 300 ms a loaded machine
    // (a fresh-clone make test) let the grace end first, so the proxy closed before the frame's end came.
    @Test("ws-close to the client mid-frame: the frame ends, then the close frame (1012), nothing after it, FIN after the grace")
    func webSocketCloseToClient() async throws {
        let harness = try await ProxyHarness(frames: WebSocketProtocol.self)
        try await offPool {
            let (client, server) = try harness.connectPair()
            client.setTimeout(10)
            server.setTimeout(10)
            try client.sendAll(Self.upgradeRequest)
            #expect(server.receive(exactly: Self.upgradeRequest.count) == Self.upgradeRequest)
            let first = Self.frame(pattern(count: 1000, seed: 1))
            try server.sendAll(Self.upgradeResponse + Array(first[..<404]))
            #expect(client.receive(exactly: Self.upgradeResponse.count + 404).count == Self.upgradeResponse.count + 404)
            #expect(try fire(harness, wsClose(code: 1012, side: "client", grace: "2s")) == 1)
            try server.sendAll(Array(first[404...]) + Self.frame(Array("after the close".utf8)))
            let (rest, end) = client.receiveUntilEnd()
            let close = WebSocketProtocol.closeFrame(code: 1012, masked: false)
            #expect(rest == Array(first[404...]) + close, "the frame's end, then the close frame and nothing else")
            #expect(Array(close[2..<4]) == [0x03, 0xf4])
            #expect(end == .eof, "FIN after the grace time, not a reset")
            #expect(server.receiveUntilEnd().1 == .eof, "the server leg is closed in order too")
            #expect(harness.proxy.counters.cutByFault == 1)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("ws-close to the server: a masked close frame after the client's frame ends; the client hears nothing more")
    func webSocketCloseToServer() async throws {
        let harness = try await ProxyHarness(frames: WebSocketProtocol.self)
        try await offPool {
            let (client, server) = try harness.connectPair()
            client.setTimeout(10)
            server.setTimeout(10)
            try client.sendAll(Self.upgradeRequest)
            try server.sendAll(Self.upgradeResponse)
            _ = server.receive(exactly: Self.upgradeRequest.count)
            _ = client.receive(exactly: Self.upgradeResponse.count)
            let message = Self.maskedFrame(pattern(count: 300, seed: 2))
            try client.sendAll(Array(message[..<100]))
            _ = server.receive(exactly: 100)
            #expect(try fire(harness, wsClose(code: 1001, side: "server", grace: "2s")) == 1)
            try client.sendAll(Array(message[100...]) + Self.maskedFrame([9, 9, 9]))
            try server.sendAll(Self.frame(Array("to the client".utf8)))
            let (rest, end) = server.receiveUntilEnd()
            let close = Array(rest.dropFirst(message.count - 100))
            #expect(Array(rest.prefix(message.count - 100)) == Array(message[100...]))
            #expect(close.count == 2 + 4 + 16 && close[0] == 0x88 && close[1] == 0x80 | 16, "a masked close frame: \(close)")
            if close.count == 22 {
                let code = [close[6] ^ close[2], close[7] ^ close[3]]
                #expect(code == [0x03, 0xe9], "code 1001")
            }
            #expect(end == .eof)
            let (toClient, clientEnd) = client.receiveUntilEnd()
            #expect(toClient.isEmpty, "nothing passes to the client once the frame in flight ended")
            #expect(clientEnd == .eof)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("goaway: GOAWAY (NO_ERROR, the last stream the client opened) at an HTTP/2 frame boundary, traffic drains, FIN after the grace")
    func goaway() async throws {
        let harness = try await ProxyHarness(frames: GRPCProtocol.self)
        try await offPool {
            let (client, server) = try harness.connectPair()
            client.setTimeout(10)
            server.setTimeout(10)
            func h2(_ type: UInt8, flags: UInt8 = 0, stream: UInt8, _ payload: [UInt8]) -> [UInt8] {
                [0, UInt8(payload.count >> 8), UInt8(payload.count & 0xff), type, flags, 0, 0, 0, stream] + payload
            }
            let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
            let opening = preface + h2(4, stream: 0, []) + h2(1, flags: 4, stream: 1, [0x82]) + h2(1, stream: 3, [0x82])
            try client.sendAll(opening)
            _ = server.receive(exactly: opening.count)
            let settings = h2(4, stream: 0, [0, 3, 0, 0, 0, 100])
            try server.sendAll(Array(settings[..<5]))
            _ = client.receive(exactly: 5)
            #expect(try fire(harness, GRPCProtocol.faults[0].fault(["grace": "2s"])) == 1)
            let data = h2(0, flags: 1, stream: 1, [0, 0, 0, 0, 2, 7, 7])
            try server.sendAll(Array(settings[5...]) + data)
            let expected = Array(settings[5...]) + GRPCProtocol.goawayFrame(lastStream: 3) + data
            #expect(client.receive(exactly: expected.count) == expected, "SETTINGS ends, then GOAWAY naming stream 3, then the DATA")
            // Still draining: the client's CONTINUATION for stream 3 reaches the server.
            let continuation = h2(9, flags: 4, stream: 3, [0x84])
            try client.sendAll(continuation)
            #expect(server.receive(exactly: continuation.count) == continuation)
            #expect(client.receiveUntilEnd().1 == .eof)
            #expect(server.receiveUntilEnd().1 == .eof)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("a ws-close posted to the control API (chaos proxy --frames websocket) reaches a live connection as in a scenario")
    func webSocketCloseThroughTheAPI() async throws {
        let harness = try await ProxyHarness(frames: WebSocketProtocol.self)
        let api = ControlAPI(proxies: [harness.proxy], group: harness.group)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let apiPort = try #require(Int(address.split(separator: ":").last ?? ""))
        try await offPool {
            let (client, server) = try harness.connectPair()
            client.setTimeout(10)
            server.setTimeout(10)
            try client.sendAll(Self.upgradeRequest)
            _ = server.receive(exactly: Self.upgradeRequest.count)
            try server.sendAll(Self.upgradeResponse)
            _ = client.receive(exactly: Self.upgradeResponse.count)
            let (status, body) = try ControlAPITests().request(
                apiPort,
                "POST",
                "/faults",
                body: #"{"ws-close": {"code": 1001, "grace": "200ms"}}"#
            )
            #expect(status == 201, "\(body)")
            let (rest, end) = client.receiveUntilEnd()
            #expect(rest == WebSocketProtocol.closeFrame(code: 1001, masked: false))
            #expect(end == .eof)
            client.close()
            server.close()
        }
        await api.stop()
        await harness.shutdown()
    }

    /// A restarted server answers a request it gets; it never writes an answer nobody asked for. aiohttp (python-engineio's
    /// HTTP client) keeps an unasked answer that reaches an idle kept-alive connection and hands it to whichever request
    /// takes that connection next: a POST then ended engine.io's write loop while its read loop, on a new connection,
    /// went on polling the session (fresh-clone runs s48q4 and s49h1: a client that never started a new session).
    @Test(
        "eio-session-unknown on a kept-alive polling connection with no request outstanding: nothing reaches the client until its next request, which gets the 400 and never reaches the server"
    )
    func sessionUnknownAnswersTheNextRequest() async throws {
        let harness = try await ProxyHarness(frames: SocketIOProtocol.self)
        // The connection closes when the grace ends: long enough for the steps below on a loaded machine (s54bq2: in
        // the full unit lane the strike's call returned after more than a 3 s grace, and the client met the close
        // before its POST), and the reads that wait for that close wait longer still.
        let unknown = try #require(SocketIOProtocol.faults.first { $0.kind == "eio-session-unknown" }).fault(["grace": "15s"])
        try await offPool {
            let (client, server) = try harness.connectPair()
            client.setTimeout(30)
            server.setTimeout(30)
            let poll = Array("GET /socket.io/?EIO=4&transport=polling&sid=Ab-1 HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n6".utf8)
            try client.sendAll(poll)
            #expect(server.receive(exactly: poll.count) == poll)
            try server.sendAll(answer)
            #expect(client.receive(exactly: answer.count) == answer)
            #expect(try fire(harness, unknown) == 1)
            // Written at the strike, an unasked answer would be here by now.
            client.setTimeout(0.5)
            #expect(client.receive() == .error(EAGAIN), "nothing before the client's next request")
            client.setTimeout(30)
            let post = Array("POST /socket.io/?EIO=4&transport=polling&sid=Ab-1 HTTP/1.1\r\nContent-Length: 1\r\n\r\n3".utf8)
            try client.sendAll(post)
            let (refused, end) = client.receiveUntilEnd()
            #expect(refused == SocketIOProtocol.sessionUnknownAnswer, "the 400 answers the POST, and nothing follows it")
            #expect(end == .eof)
            #expect(server.receiveUntilEnd() == ([], .eof), "the POST never reached the server")
            client.close()
            server.close()
        }
        await harness.shutdown()
    }

    @Test("a proxy that does not follow frames reaches no connection with a protocol fault")
    func untrackedProxy() async throws {
        let harness = try await ProxyHarness()
        try await offPool {
            let (client, server) = try harness.connectPair()
            #expect(try fire(harness, wsClose(code: 1012, side: "both", grace: "0s")) == 0)
            client.close()
            server.close()
        }
        await harness.shutdown()
    }
}
