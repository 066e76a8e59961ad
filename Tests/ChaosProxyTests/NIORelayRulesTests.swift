import ChaosCore
import NIOCore
import NIOEmbedded
import Testing

@testable import ChaosProxy

/// The machine's rules as the NIO relay performs them with shaping on, in virtual time: what the
/// conformance suite (no shaping) cannot show.
@Suite("NIO relay: backpressure and FIN behind shaped bytes, through the state machine")
struct NIORelayRulesTests {
    func send(_ relay: EmbeddedRelay, from side: Side) throws {
        try relay.channels[side.slot].writeInbound(ByteBuffer(bytes: WireStep.payload(from: side)))
    }

    @Test("a FIN waits behind the bytes the partner's shaper holds, and keeps its own latency from when it was read")
    func finBehindShapedBytes() throws {
        let relay = try EmbeddedRelay()
        defer { relay.finish() }
        relay.connection.addShaping(.latency(add: .milliseconds(100), jitter: .zero, direction: .upstream), key: ShapingKey(occurrence: 1))
        try send(relay, from: .client)
        relay.loop.advanceTime(by: .milliseconds(50))
        relay.ends[0].peerSentFIN()
        #expect(relay.connection.machine.leg(.server).hasPending, "the shaper's bytes are the server leg's pending bytes")
        #expect(!relay.connection.machine.leg(.server).sentFIN, "the machine holds the FIN behind them")
        relay.loop.advanceTime(by: .milliseconds(50))
        #expect(relay.views[1].received == WireStep.payload(from: .client))
        #expect(relay.views[1].end == .open, "the bytes went at 100 ms; the FIN read at 50 ms is due at 150 ms")
        relay.loop.advanceTime(by: .milliseconds(49))
        #expect(relay.views[1].end == .open)
        relay.loop.advanceTime(by: .milliseconds(1))
        #expect(relay.views[1].end == .fin)
        #expect(relay.views[0].end == .open, "the other direction stays open")
    }

    @Test("a leg whose shaper is pressured stops reads from its partner; draining resumes them")
    func backpressure() throws {
        let relay = try EmbeddedRelay(highWater: 4)
        defer { relay.finish() }
        relay.connection.addShaping(.partition(direction: .upstream), key: ShapingKey(occurrence: 1))
        relay.channels[0].read()
        let before = relay.ends[0].reads
        #expect(before > 0, "the client is read while the server leg accepts")
        try send(relay, from: .client)
        try relay.channels[0].writeInbound(ByteBuffer(string: "more bytes than four"))
        #expect(!relay.connection.machine.leg(.server).accepts)
        #expect(!relay.connection.mayRead(.client))
        relay.channels[0].read()
        #expect(relay.ends[0].reads == before, "no read while the server's shaper holds too much")
        #expect(relay.connection.mayRead(.server), "the other direction is not held back")
        relay.connection.removeShaping(key: ShapingKey(occurrence: 1))
        #expect(relay.connection.machine.leg(.server).accepts)
        #expect(relay.ends[0].reads == before + 1, "the held-back read goes once the shaper drained")
        #expect(relay.views[1].received == Array("cmore bytes than four".utf8))
    }
}
