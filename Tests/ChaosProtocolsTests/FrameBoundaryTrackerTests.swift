import ChaosCore
import Testing

@testable import ChaosProtocols

@Suite("Frame boundaries of WebSocket, HTTP/2, MQTT and Engine.IO streams, however the bytes are cut")
struct FrameBoundaryTrackerTests {
    /// The offsets at which the tracker stands at a boundary, feeding `bytes` in pieces of `chunk`.
    private func boundaries(_ bytes: [UInt8], _ framing: String, producer: Side, chunk: Int) -> [Int] {
        var tracker = ProtocolRegistry.plugin(following: framing)!.boundaryTracker(producer: producer)
        var found: [Int] = []
        var offset = 0
        while offset < bytes.count {
            let piece = Array(bytes[offset..<min(bytes.count, offset + chunk)])
            var used = 0
            while used < piece.count {
                let consumed = piece[used...].withUnsafeBytes { tracker.advance($0, stopAtBoundary: true) }
                used += consumed
                if tracker.atBoundary, found.last != offset + used { found.append(offset + used) }
                if consumed == 0 {
                    used += piece[used...].withUnsafeBytes { tracker.advance(UnsafeRawBufferPointer(rebasing: $0[0..<1]), stopAtBoundary: false) }
                }
            }
            offset += piece.count
        }
        return found
    }

    @Test("WebSocket: the head, then frames with 7, 16 and 64-bit lengths, masked and not", arguments: [1, 3, 1000])
    func webSocket(chunk: Int) {
        let head = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".utf8)
        let small: [UInt8] = [0x81, 3] + Array("abc".utf8)
        let medium: [UInt8] = [0x82, 126, 1, 0] + [UInt8](repeating: 7, count: 256)
        let large: [UInt8] = [0x02, 127, 0, 0, 0, 0, 0, 1, 0, 0] + [UInt8](repeating: 8, count: 65536)
        let masked: [UInt8] = [0x80, 0x82, 1, 2, 3, 4, 9, 9]
        let ping: [UInt8] = [0x89, 0]
        let bytes = head + small + medium + large + ping + masked
        var expected = [head.count]
        for frame in [small, medium, large, ping, masked] { expected.append(expected.last! + frame.count) }
        #expect(boundaries(bytes, "websocket", producer: .server, chunk: chunk) == expected)
    }

    @Test(
        "HTTP/2: the preface, frames, no boundary inside a HEADERS + CONTINUATION block; the highest stream the client opened",
        arguments: [1, 5, 1000]
    )
    func http2(chunk: Int) {
        func h2(_ type: UInt8, flags: UInt8 = 0, stream: UInt8, _ length: Int) -> [UInt8] {
            [0, UInt8(length >> 8), UInt8(length & 0xff), type, flags, 0, 0, 0, stream] + [UInt8](repeating: 0, count: length)
        }
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        let settings = h2(4, stream: 0, 6)
        let headers = h2(1, stream: 5, 3)
        let continuation = h2(9, flags: 4, stream: 5, 2)
        let data = h2(0, stream: 5, 300)
        let bytes = preface + settings + headers + continuation + data
        let afterSettings = preface.count + settings.count
        let afterBlock = afterSettings + headers.count + continuation.count
        #expect(
            boundaries(bytes, "http2", producer: .client, chunk: chunk)
                == [preface.count, afterSettings, afterBlock, afterBlock + data.count]
        )
        var tracker = HTTP2BoundaryTracker(producer: .client)
        _ = bytes.withUnsafeBytes { tracker.advance($0, stopAtBoundary: false) }
        #expect(tracker.highestStream == 5)
    }

    @Test("an h2c upgrade: the request head, then the preface; the server's 101 head, then frames")
    func h2cUpgrade() {
        let request = Array("GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n".utf8) + Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        #expect(boundaries(request, "http2", producer: .client, chunk: 2) == [request.count])
        let response = Array("HTTP/1.1 101 Switching Protocols\r\n\r\n".utf8)
        #expect(boundaries(response, "http2", producer: .server, chunk: 2) == [response.count])
    }

    @Test("a frame header announcing 2^63 bytes holds no memory: it just never reaches a boundary")
    func hugeLength() {
        let head = Array("HTTP/1.1 101 Switching Protocols\r\n\r\n".utf8)
        let bytes = head + [0x82, 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff] + [UInt8](repeating: 1, count: 100_000)
        #expect(boundaries(bytes, "websocket", producer: .server, chunk: 4096) == [head.count])
    }

    @Test("MQTT: a CONNECT, a PINGREQ and a PUBLISH with a two-byte remaining length, however the bytes are cut", arguments: [1, 2, 7, 4096])
    func mqtt(chunk: Int) {
        let connect: [UInt8] = [0x10, 15, 0, 4] + Array("MQTT".utf8) + [5, 0b10, 0, 60, 0, 0, 2] + Array("c1".utf8)
        let ping: [UInt8] = [0xC0, 0]
        let publish: [UInt8] = [0x30, 0xC8, 0x01, 0, 3] + Array("a/b".utf8) + [UInt8](repeating: 7, count: 195)
        let bytes = connect + ping + publish
        #expect(boundaries(bytes, "mqtt", producer: .client, chunk: chunk) == [0, connect.count, connect.count + 2, bytes.count])
    }

    @Test("mqtt-disconnect: the broker's DISCONNECT with its reason to an MQTT 5 client, none to a 3.1.1 one; silence both ways")
    func mqttDisconnect() throws {
        let fault = try #require(MQTTProtocol.faults.first { $0.kind == "mqtt-disconnect" }).fault(["reason": 0x8B, "grace": "1s"])
        for (level, expected) in [(UInt8(5), [UInt8(0xE0), 2, 0x8B, 0]), (4, [])] {
            var client = MQTTProtocol.boundaryTracker(producer: .client)
            let connect: [UInt8] =
                [0x10, 14 + (level == 5 ? 1 : 0), 0, 4] + Array("MQTT".utf8) + [level, 0b10, 0, 60]
                + (level == 5 ? [0] : []) + [0, 2] + Array("c1".utf8)
            _ = connect.withUnsafeBytes { client.advance($0, stopAtBoundary: false) }
            #expect((client as? MQTTBoundaryTracker)?.protocolLevel == level)
            let frames = try #require(MQTTProtocol.faultFrames(fault, connection: 1, client: client))
            #expect(frames.inserts == [.init(frame: [], silenceAfter: true), .init(frame: expected, silenceAfter: true)], "level \(level)")
            #expect(frames.grace == .seconds(Int64(1)))
        }
        #expect(WebSocketProtocol.faultFrames(fault, connection: 1, client: MQTTBoundaryTracker()) == nil)
    }

    @Test(
        "Engine.IO: polling requests and answers by Content-Length and chunked, a 204, then the upgrade's frames",
        arguments: [1, 2, 5, 4096]
    )
    func engineIO(chunk: Int) {
        let post = Array("POST /socket.io/?EIO=4&transport=polling&sid=a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n42[1]".utf8)
        let get = Array("GET /socket.io/?EIO=4&transport=polling&sid=a HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        let upgrade = Array("GET /socket.io/?EIO=4&transport=websocket&sid=a HTTP/1.1\r\nUpgrade: websocket\r\n\r\n".utf8)
        let probe: [UInt8] = [0x81, 0x86, 1, 2, 3, 4] + [UInt8](repeating: 0, count: 6)
        let requests: [UInt8] = post + get + upgrade + probe
        var requestEnds = [0]
        for part in [post, get, upgrade, probe] { requestEnds.append(requestEnds.last! + part.count) }
        #expect(boundaries(requests, "socketio", producer: .client, chunk: chunk) == requestEnds)
        let ok = Array("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".utf8)
        let chunked = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n42[1]\r\n3\r\n\u{1e}41\r\n0\r\nTrailer: z\r\n\r\n".utf8)
        let none = Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)
        let switching = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".utf8)
        let pong: [UInt8] = [0x81, 6] + Array("3probe".utf8)
        let answers: [UInt8] = ok + chunked + none + switching + pong
        var expected = [0, ok.count]
        for part in [chunked, none, switching, pong] { expected.append(expected.last! + part.count) }
        #expect(boundaries(answers, "socketio", producer: .server, chunk: chunk) == expected)
        // An answer that runs to the connection's end leaves no boundary after it.
        let open = Array("HTTP/1.1 200 OK\r\n\r\n0{}".utf8)
        #expect(boundaries(open + ok, "socketio", producer: .server, chunk: chunk) == [0])
    }

    @Test("eio-session-unknown and eio-poll-hang reach a polling connection, not one upgraded to a WebSocket")
    func engineIOFaults() throws {
        let unknown = try #require(SocketIOProtocol.faults.first { $0.kind == "eio-session-unknown" }).fault(["grace": "1s"])
        let hang = try #require(SocketIOProtocol.faults.first { $0.kind == "eio-poll-hang" }).fault(["hold": "4s"])
        var client = SocketIOProtocol.boundaryTracker(producer: .client)
        let get = Array("GET /socket.io/?EIO=4&transport=polling&sid=a HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = get.withUnsafeBytes { client.advance($0, stopAtBoundary: false) }
        let refused = try #require(SocketIOProtocol.faultFrames(unknown, connection: 1, client: client))
        let answer = String(decoding: try #require(refused.inserts[1]).frame, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 400 ") && answer.hasSuffix("\r\n\r\n{\"code\":1,\"message\":\"Session ID unknown\"}"))
        #expect(answer.contains("Content-Length: 41\r\n"))
        #expect(refused.inserts[0] == .init(frame: [], silenceAfter: true) && refused.grace == .seconds(Int64(1)))
        let hung = try #require(SocketIOProtocol.faultFrames(hang, connection: 1, client: client))
        #expect(hung.inserts == [nil, .init(frame: [], silenceAfter: true)] && hung.grace == .seconds(Int64(4)))
        let upgrade = Array("GET /socket.io/?EIO=4&transport=websocket&sid=a HTTP/1.1\r\nUpgrade: websocket\r\n\r\n".utf8)
        _ = upgrade.withUnsafeBytes { client.advance($0, stopAtBoundary: false) }
        #expect(SocketIOProtocol.faultFrames(unknown, connection: 1, client: client) == nil)
        #expect(SocketIOProtocol.faultFrames(hang, connection: 1, client: client) == nil)
        #expect(WebSocketProtocol.faultFrames(unknown, connection: 1, client: EngineIOBoundaryTracker()) == nil)
    }

    /// A restarted server forgets every session it had: a client's next long-poll may go on a connection the strike
    /// never reached (a fresh-clone run saw one client's POST connection struck and its GET go on a new one, which the
    /// server, still knowing the session, answered: that client never noticed).
    @Test(
        "eio-session-unknown outlives its strike: a later polling request naming a session it struck is caught on any connection, one naming another is not"
    )
    func sessionUnknownLingers() throws {
        let unknown = try #require(SocketIOProtocol.faults.first { $0.kind == "eio-session-unknown" }).fault(["grace": "1s"])
        func client(_ request: String) -> any FrameBoundaryTracking {
            var tracker = SocketIOProtocol.boundaryTracker(producer: .client)
            let bytes = Array(request.utf8)
            _ = bytes.withUnsafeBytes { tracker.advance($0, stopAtBoundary: false) }
            return tracker
        }
        let server = SocketIOProtocol.boundaryTracker(producer: .server)
        let post = "POST /socket.io/?EIO=4&transport=polling&t=1&sid=Ab-1 HTTP/1.1\r\nContent-Length: 1\r\n\r\n3"
        let handshake = "GET /socket.io/?EIO=4&transport=polling&t=2 HTTP/1.1\r\n\r\n"
        let lingering = try #require(SocketIOProtocol.lingering(unknown, struck: [client(post), client(handshake)]))
        #expect(lingering.kind == "eio-session-unknown" && lingering.duration("grace") == .seconds(Int64(1)))
        #expect(lingering.text("forgotten") == "Ab-1", "the sessions the struck clients named, not a handshake's")
        #expect(
            SocketIOProtocol.catches(lingering, client: client("GET /socket.io/?EIO=4&transport=polling&sid=Ab-1 HTTP/1.1\r\n\r\n"), server: server)
        )
        #expect(
            !SocketIOProtocol.catches(lingering, client: client("GET /socket.io/?EIO=4&transport=polling&sid=Ab-2 HTTP/1.1\r\n\r\n"), server: server)
        )
        #expect(!SocketIOProtocol.catches(lingering, client: client(handshake), server: server), "a new session's handshake")
        #expect(
            !SocketIOProtocol.catches(unknown, client: client("GET /socket.io/?EIO=4&transport=polling&sid=Ab-1 HTTP/1.1\r\n\r\n"), server: server)
        )
        // A caught connection gets the strike's own answer.
        #expect(
            SocketIOProtocol.faultFrames(lingering, connection: 2, client: client(post))
                == SocketIOProtocol.faultFrames(unknown, connection: 2, client: client(post))
        )
        #expect(SocketIOProtocol.lingering(unknown, struck: [client(handshake)]) == nil, "no session named: nothing to forget")
        // A new session's handshake on a connection kept alive from the forgotten one is not the forgotten session's.
        #expect(!SocketIOProtocol.catches(lingering, client: client(post + handshake), server: server))
    }

    @Test(
        "eio-session-unknown's 400 answers a request: one awaits its answer once the client has written more requests than the server began answers"
    )
    func answerAwaited() {
        var client = SocketIOProtocol.boundaryTracker(producer: .client)
        var server = SocketIOProtocol.boundaryTracker(producer: .server)
        func feed(_ tracker: inout any FrameBoundaryTracking, _ text: String) {
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { tracker.advance($0, stopAtBoundary: false) }
        }
        #expect(!SocketIOProtocol.awaitsAnswer(client: client, server: server), "nothing asked yet")
        feed(&client, "GET /socket.io/?EIO=4&transport=polling&sid=a HTTP/1.1\r\n\r\n")
        #expect(SocketIOProtocol.awaitsAnswer(client: client, server: server), "a poll outstanding")
        feed(&server, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n6")
        #expect(!SocketIOProtocol.awaitsAnswer(client: client, server: server), "answered: the connection is idle")
        feed(&client, "POST /socket.io/?EIO=4&transport=polling&sid=a HTTP/1.1\r\nContent-Length: 1\r\n\r\n3")
        #expect(SocketIOProtocol.awaitsAnswer(client: client, server: server), "the next request")
        #expect(WebSocketProtocol.awaitsAnswer(client: client, server: server), "a protocol that does not say: always")
    }

    @Test(
        "eio-upgrade-hang catches an upgrade of a session asked for and not yet answered: not a poll, not a WebSocket already up, not a session begun on a WebSocket"
    )
    func engineIOUpgradeHang() throws {
        let declaration = try #require(SocketIOProtocol.faults.first { $0.kind == "eio-upgrade-hang" })
        #expect(declaration.lasting)
        let fault = declaration.fault(["hold": "3s"])
        var client = SocketIOProtocol.boundaryTracker(producer: .client)
        var server = SocketIOProtocol.boundaryTracker(producer: .server)
        let poll = Array("GET /socket.io/?EIO=4&transport=polling&sid=a HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = poll.withUnsafeBytes { client.advance($0, stopAtBoundary: false) }
        #expect(!SocketIOProtocol.catches(fault, client: client, server: server), "a poll is not an upgrade")
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n6".utf8)
        _ = answer.withUnsafeBytes { server.advance($0, stopAtBoundary: false) }
        let upgrade = Array("GET /socket.io/?EIO=4&transport=websocket&sid=a HTTP/1.1\r\nUpgrade: websocket\r\n\r\n".utf8)
        _ = upgrade.withUnsafeBytes { client.advance($0, stopAtBoundary: false) }
        #expect(SocketIOProtocol.catches(fault, client: client, server: server), "the upgrade of session a, not answered yet")
        let frames = try #require(SocketIOProtocol.faultFrames(fault, connection: 1, client: client))
        #expect(frames.inserts == [nil, .init(frame: [], silenceAfter: true)] && frames.grace == .seconds(Int64(3)))
        let switching = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".utf8)
        _ = switching.withUnsafeBytes { server.advance($0, stopAtBoundary: false) }
        #expect(!SocketIOProtocol.catches(fault, client: client, server: server), "a WebSocket already up")
        var fresh = SocketIOProtocol.boundaryTracker(producer: .client)
        let direct = Array("GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nUpgrade: websocket\r\n\r\n".utf8)
        _ = direct.withUnsafeBytes { fresh.advance($0, stopAtBoundary: false) }
        #expect(!SocketIOProtocol.catches(fault, client: fresh, server: SocketIOProtocol.boundaryTracker(producer: .server)))
        #expect(!WebSocketProtocol.catches(fault, client: client, server: server))
    }

    @Test("each plug-in whose frames the proxy follows is found by its frames, and no other plug-in answers a fault")
    func registry() throws {
        #expect(ProtocolRegistry.plugin(following: "websocket")?.name == WebSocketProtocol.name)
        #expect(ProtocolRegistry.plugin(following: "http2")?.name == GRPCProtocol.name)
        let goaway = GRPCProtocol.faults[0].fault(["grace": "1s"])
        let close = WebSocketProtocol.faults[0].fault(["code": 1012, "side": "both", "grace": "1s"])
        let tracker = HTTP2BoundaryTracker(producer: .client)
        #expect(WebSocketProtocol.faultFrames(goaway, connection: 1, client: tracker) == nil)
        #expect(GRPCProtocol.faultFrames(close, connection: 1, client: tracker) == nil)
        #expect(LinesProtocol.faultFrames(close, connection: 1, client: tracker) == nil)
        let frames = try #require(WebSocketProtocol.faultFrames(close, connection: 0x0102_0304, client: tracker))
        #expect(frames.grace == .milliseconds(1000))
        #expect(
            frames.inserts == [
                .init(frame: WebSocketProtocol.closeFrame(code: 1012, masked: true, key: 0x0102_0304), silenceAfter: true),
                .init(frame: WebSocketProtocol.closeFrame(code: 1012, masked: false), silenceAfter: true),
            ]
        )
    }

    @Test("the frames the faults send: an unmasked and a masked close, a GOAWAY")
    func frames() {
        #expect(WebSocketProtocol.closeFrame(code: 1012, masked: false) == [0x88, 16, 0x03, 0xf4] + Array("chaos ws-close".utf8))
        let masked = WebSocketProtocol.closeFrame(code: 1000, masked: true, key: 0x0102_0304)
        #expect(Array(masked[0..<6]) == [0x88, 0x90, 1, 2, 3, 4])
        #expect([masked[6] ^ 1, masked[7] ^ 2] == [0x03, 0xe8])
        #expect(GRPCProtocol.goawayFrame(lastStream: 7) == [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0])
    }
}
