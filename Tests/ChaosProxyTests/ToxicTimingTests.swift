import ChaosControl
import ChaosCore
import NIOEmbedded
import Testing

@testable import ChaosProxy

/// Every Toxiproxy toxic, from its API form to what one connection's sockets see, in virtual time: the toxic's
/// fault effect applied to a ``ProxiedConnection`` on `EmbeddedChannel`s (``EmbeddedConnection``).
@Suite("Toxics' timing on a connection, in virtual time")
struct ToxicTimingTests {
    static func effect(_ type: String, _ stream: String = "downstream", _ set: (inout ToxicAttributes) -> Void) throws -> FaultEffect {
        try #require(ToxicTests.toxic(type, stream, set).effect)
    }

    @Test("latency: the server's bytes reach the client exactly 100 ms later; the other way is not delayed")
    func latency() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("latency") { $0.latency = 100 })
        try c.send("hello", from: .server)
        try c.send("up", from: .client)
        #expect(c.wire(.server).text == "up")
        c.advance(byMilliseconds: 99)
        #expect(c.wire(.client).text == "")
        c.advance(byMilliseconds: 1)
        #expect(c.wire(.client).text == "hello" && c.wire(.client).times(of: .data("hello")) == [100])
    }

    @Test("bandwidth: 1 KB/s lets 2000 bytes through in pieces at 0, 462, 974 and 1486 ms (a 50 ms burst)")
    func bandwidth() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("bandwidth") { $0.rate = 1 })
        try c.send(String(repeating: "b", count: 2000), from: .server)
        c.advance(byMilliseconds: 2000)
        #expect(c.wire(.client).pieces == [512, 512, 512, 464])
        #expect(c.wire(.client).events.map { $0.at / 1_000_000 } == [0, 462, 974, 1486])
    }

    @Test("slicer: pieces of 10 ± 4 bytes, sizes drawn per piece (the same for the same seed), 1 ms apart")
    func slicerVariation() throws {
        func run(seed: UInt64) throws -> EmbeddedConnection.Wire {
            let c = try EmbeddedConnection(seed: seed)
            c.add(
                try Self.effect("slicer") {
                    $0.average_size = 10
                    $0.size_variation = 4
                    $0.delay = 1000
                }
            )
            try c.send(String(repeating: "s", count: 200), from: .server)
            c.advance(byMilliseconds: 100)
            return c.wire(.client)
        }
        let wire = try run(seed: 1)
        #expect(wire.text.count == 200)
        #expect(wire.pieces.dropLast().allSatisfy { (6...14).contains($0) }, "\(wire.pieces)")
        #expect(Set(wire.pieces.dropLast()).count > 3, "sizes vary: \(wire.pieces)")
        let times = wire.events.map { $0.at / 1_000_000 }
        #expect(times == Array(0..<Int64(times.count)), "one piece a millisecond")
        #expect(try run(seed: 1).pieces == wire.pieces)
        #expect(try run(seed: 2).pieces != wire.pieces)
    }

    @Test("timeout: nothing passes that way; at 300 ms what was held is dropped and both legs get a FIN")
    func timeout() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("timeout", "upstream") { $0.timeout = 300 })
        try c.send("held", from: .client)
        try c.send("down", from: .server)
        #expect(c.wire(.client).text == "down")
        c.advance(byMilliseconds: 299)
        #expect(c.wire(.server).events.isEmpty)
        c.advance(byMilliseconds: 1)
        #expect(c.wire(.server).text == "" && c.wire(.server).times(of: .fin) == [300])
        #expect(c.wire(.client).times(of: .fin) == [300])
    }

    @Test("timeout 0: held until the toxic is removed, then released in order")
    func timeoutForever() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("timeout", "upstream") { $0.timeout = 0 })
        try c.send("a", from: .client)
        try c.send("b", from: .client)
        c.advance(byMilliseconds: 3_600_000)
        #expect(c.wire(.server).events.isEmpty)
        c.remove()
        #expect(c.wire(.server).text == "ab")
        #expect(c.wire(.server).times(of: .fin).isEmpty)
    }

    @Test("reset_peer: the first bytes that way are swallowed, and 20 ms after them both legs are reset")
    func resetPeer() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("reset_peer") { $0.timeout = 20 })
        c.advance(byMilliseconds: 500)  // nothing happens before bytes come its way
        try c.send("lost", from: .server)
        c.advance(byMilliseconds: 10)
        try c.send("also lost", from: .server)
        try c.send("up", from: .client)
        c.advance(byMilliseconds: 9)
        #expect(c.wire(.client).events.isEmpty && c.wire(.server).text == "up")
        c.advance(byMilliseconds: 1)
        for side in Side.allCases {
            #expect(c.wire(side).times(of: .close) == [520] && c.wire(side).times(of: .fin).isEmpty, "\(side) is reset")
        }
    }

    @Test("limit_data: 10 bytes pass that way, then both legs are closed (FIN) behind them")
    func limitData() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("limit_data") { $0.bytes = 10 })
        try c.send("123456", from: .server)
        #expect(c.wire(.client).text == "123456" && c.wire(.client).times(of: .fin).isEmpty)
        try c.send("789abc", from: .server)
        c.loop.run()
        #expect(c.wire(.client).text == "123456789a")
        #expect(c.wire(.client).events.last?.event == .fin && c.wire(.server).times(of: .fin) == [0])
    }

    @Test("slow_close: the server's FIN reaches the client 500 ms late, behind its bytes; the other way is not delayed")
    func slowClose() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("slow_close") { $0.delay = 500 })
        try c.send("last", from: .server)
        c.sendFIN(from: .server)
        #expect(c.wire(.client).text == "last")
        c.advance(byMilliseconds: 499)
        #expect(c.wire(.client).times(of: .fin).isEmpty)
        c.advance(byMilliseconds: 1)
        #expect(c.wire(.client).times(of: .fin) == [500])
        c.sendFIN(from: .client)
        #expect(c.wire(.server).times(of: .fin) == [500])
    }

    @Test("a toxic removed before its timer runs out does nothing more")
    func removedBeforeTimer() throws {
        let c = try EmbeddedConnection()
        c.add(try Self.effect("timeout") { $0.timeout = 100 })
        c.remove()
        c.advance(byMilliseconds: 1000)
        try c.send("fine", from: .server)
        #expect(c.wire(.client).text == "fine" && c.wire(.client).times(of: .fin).isEmpty)
    }

    @Test("a connection that starts under toxics gets their rules and timers from its start")
    func newConnection() throws {
        let c = try EmbeddedConnection(startingUnder: [
            try Self.effect("timeout", "upstream") { $0.timeout = 300 },
            try Self.effect("limit_data") { $0.bytes = 3 },
        ])
        try c.send("12345", from: .server)
        c.loop.run()
        #expect(c.wire(.client).text == "123" && c.wire(.client).times(of: .fin) == [0])
        let d = try EmbeddedConnection(startingUnder: [try Self.effect("timeout", "upstream") { $0.timeout = 300 }])
        try d.send("held", from: .client)
        d.advance(byMilliseconds: 300)
        #expect(d.wire(.server).text == "" && d.wire(.server).times(of: .fin) == [300])
    }
}
