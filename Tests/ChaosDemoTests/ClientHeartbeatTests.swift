import ChaosCore
import NIOCore
import NIOEmbedded
import Testing

@testable import ChaosDemo

/// The demo client's heartbeat across connections, on an embedded loop: virtual time, no sockets.
@Suite("Demo client heartbeat")
struct ClientHeartbeatTests {
    /// Fails the first PING written through it by closing the connection inside the write, as a write that meets the
    /// peer's reset does (ECONNRESET from writev closes a NIO channel before `write` returns).
    final class ResetOnPing: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            let bytes = unwrapOutboundIn(data)
            if WireMessage(line: bytes.readableBytesView)?.kind == .ping {
                promise?.fail(ChannelError.ioOnClosedChannel)
                context.close(promise: nil)
                return
            }
            context.write(data, promise: promise)
        }
    }

    /// The PINGs a connection wrote so far.
    static func pings(on channel: EmbeddedChannel) throws -> Int {
        var count = 0
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            if WireMessage(line: buffer.readableBytesView)?.kind == .ping { count += 1 }
        }
        return count
    }

    @Test("a PING whose write resets the connection leaves no timeout behind: the next connection still pings")
    func resetByThePingLeavesTheNextConnectionItsHeartbeat() throws {
        let loop = EmbeddedEventLoop()
        let configuration = DemoClientConfiguration(
            connect: DemoAddress(host: "127.0.0.1", port: 9),
            rate: 0,
            heartbeatInterval: .seconds(Int64(1)),
            heartbeatTimeout: .seconds(Int64(2))
        )
        let engine = ClientEngine(configuration: configuration, loop: loop)

        let first = EmbeddedChannel(loop: loop)
        try first.pipeline.syncOperations.addHandlers([ResetOnPing(), WireHandler(delegate: engine)])
        try first.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        #expect(engine.channel === first)
        loop.advanceTime(by: .seconds(1))  // the first tick's PING meets the reset
        #expect(engine.channel == nil, "the reset ended the first connection")
        #expect(engine.pingTimeout == nil, "a timeout outlived the connection it was armed for")
        engine.reconnect?.cancel()  // the test brings the next connection itself
        engine.reconnect = nil

        let second = EmbeddedChannel(loop: loop)
        try second.pipeline.syncOperations.addHandler(WireHandler(delegate: engine))
        try second.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        #expect(engine.channel === second)
        loop.advanceTime(by: .seconds(1))
        #expect(try Self.pings(on: second) == 1, "the second connection's heartbeat sent no PING")
        // Unanswered, its PING ends the connection after the timeout: the heartbeat notices a dead path.
        loop.advanceTime(by: .seconds(2))
        #expect(engine.channel == nil && !second.isActive)
        engine.reconnect?.cancel()
        engine.stoppedPromise.succeed(())  // the engine never ran: nothing else completes it
        _ = try? first.finish()
        _ = try? second.finish()
    }
}
