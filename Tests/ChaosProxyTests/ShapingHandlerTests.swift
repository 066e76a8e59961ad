import ChaosCore
import NIOCore
import NIOEmbedded
import Testing

@testable import ChaosProxy

@Suite("ShapingHandler on an EmbeddedChannel with virtual time")
struct ShapingHandlerTests {
    /// Collects the user events the handler fires inbound.
    final class PressureRecorder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var events: [ShapingPressure] = []
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let pressure = event as? ShapingPressure { events.append(pressure) }
        }
    }

    func channel(highWater: Int = 1 << 20) throws -> (EmbeddedChannel, ShapingHandler, PressureRecorder) {
        let handler = ShapingHandler(highWater: highWater, generator: SeededGenerator(seed: 1))
        let recorder = PressureRecorder()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([handler, recorder])
        try channel.connect(to: .init(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, handler, recorder)
    }

    func write(_ channel: EmbeddedChannel, _ text: String) throws {
        try channel.writeAndFlush(ByteBuffer(string: text)).wait()
    }

    func output(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { text += buffer.readString(length: buffer.readableBytes)! }
        return text
    }

    @Test("a 100 ms latency releases bytes exactly 100 ms later")
    func latency() throws {
        let (channel, handler, _) = try channel()
        handler.apply(ShapingSettings(latency: 100_000_000))
        try write(channel, "hello")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(99))
        #expect(try output(channel) == "")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(try output(channel) == "hello")
        _ = try channel.finish()
    }

    @Test("a hold keeps bytes and the half-close until lifted, then sends them in order")
    func holdThenRelease() throws {
        let (channel, handler, _) = try channel()
        handler.apply(ShapingSettings(hold: true))
        try write(channel, "a")
        try write(channel, "b")
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(try output(channel) == "")
        #expect(handler.heldBytes == 2)
        handler.apply(.none)
        #expect(try output(channel) == "ab")
        _ = try channel.finish()
    }

    @Test("holding past the high-water mark pauses the producer; draining resumes it")
    func pressureEvents() throws {
        let (channel, handler, recorder) = try channel(highWater: 8)
        handler.apply(ShapingSettings(hold: true))
        try write(channel, "12345")
        #expect(recorder.events.isEmpty)
        try write(channel, "67890")
        #expect(recorder.events == [.paused])
        handler.apply(.none)
        #expect(recorder.events == [.paused, .resumed])
        #expect(try output(channel) == "1234567890")
        _ = try channel.finish()
    }

    @Test("a bandwidth cap of 1 kB/s sends 2 kB over 2 virtual seconds")
    func bandwidth() throws {
        let (channel, handler, _) = try channel()
        handler.apply(ShapingSettings(bytesPerSecond: 1000))
        try write(channel, String(repeating: "x", count: 2000))
        var delivered: [Int] = []
        for _ in 0..<4 {
            delivered.append(try output(channel).count)
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        }
        delivered.append(try output(channel).count)
        #expect(delivered.reduce(0, +) == 2000)
        #expect(delivered[0] <= 600, "first instant sent \(delivered[0]) bytes")
        #expect(delivered.dropFirst().allSatisfy { $0 <= 600 })
        _ = try channel.finish()
    }

    @Test("with nothing to shape, writes pass straight through")
    func passThrough() throws {
        let (channel, _, _) = try channel()
        try write(channel, "now")
        #expect(try output(channel) == "now")
        _ = try channel.finish()
    }
}
