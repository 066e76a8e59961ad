import NIOCore
import NIOWebSocket

/// Carries the reference pair's protocol over WebSocket: each NDJSON line is one text message (the newline
/// dropped), and the heartbeat is WebSocket's own: a PING line goes out as a ping frame, a ping frame is answered
/// with a pong frame at once, and a pong frame comes in as a PONG line. Sits between the (aggregated) WebSocket
/// frames and ``WireHandler``, so the engines are the same over TCP and over WebSocket.
final class WebSocketLineBridge: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    /// Whether this end is the client (RFC 6455: a client masks every frame it sends).
    private let isClient: Bool
    private static let pingLine = WireMessage(.ping).encodedLine()
    private static let pongLine = WireMessage(.pong).encodedLine()
    private var closing = false

    init(isClient: Bool) {
        self.isClient = isClient
    }

    private var maskKey: WebSocketMaskingKey? { isClient ? .random() : nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            context.fireChannelRead(wrapInboundOut(frame.unmaskedData))
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: maskKey, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: Self.pongLine.dropLast())))
        case .connectionClose:
            // Answer a close with a close (echoing its code), then end the TCP connection.
            guard !closing else {
                context.close(promise: nil)
                return
            }
            closing = true
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self) ?? 1000
            let reply = WebSocketFrame(
                fin: true,
                opcode: .connectionClose,
                maskKey: maskKey,
                data: context.channel.allocator.buffer(integer: code)
            )
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var line = unwrapOutboundIn(data)
        if line.readableBytesView.elementsEqual(Self.pingLine) {
            let ping = WebSocketFrame(fin: true, opcode: .ping, maskKey: maskKey, data: context.channel.allocator.buffer(capacity: 0))
            context.write(wrapOutboundOut(ping), promise: promise)
            return
        }
        if line.readableBytesView.last == UInt8(ascii: "\n") { line.moveWriterIndex(to: line.writerIndex - 1) }
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, maskKey: maskKey, data: line)), promise: promise)
    }
}
