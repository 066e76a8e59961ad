import NIOCore
import NIOHTTP1
import NIOWebSocket

/// How the reference pair talks: NDJSON lines over TCP (PRODUCT §6), or the same lines as WebSocket text
/// messages after an HTTP/1.1 upgrade (`--transport websocket`), with WebSocket pings as the heartbeat.
package enum DemoTransport: String, Sendable, CaseIterable {
    /// Newline-delimited JSON over plain TCP.
    case tcp
    /// WebSocket (RFC 6455, cleartext): one text message per line; the client names its stream in a header.
    case websocket
    /// gRPC (HTTP/2 cleartext): one bidirectional-streaming call per connection, one `Envelope` per message,
    /// HTTP/2 keepalive as the heartbeat; the stream is also in `x-chaos-stream` metadata.
    case grpc
}

/// The channel pipelines of the WebSocket transport.
enum WebSocketTransport {
    /// The upgrade request's path.
    static let path = "/stream"
    /// The request header that names the client's logical stream (`stream: header:x-chaos-stream` audits by it).
    static let streamHeader = "X-Chaos-Stream"
    /// The largest frame and message accepted (the pair's lines are small).
    static let maxMessage = 1 << 20

    /// Server side: HTTP/1.1 until a WebSocket upgrade on ``path``, then frames into `wire`.
    static func configureServer(_ channel: any Channel, wire: @escaping @Sendable () -> WireHandler) throws {
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: maxMessage,
            shouldUpgrade: { channel, head in
                channel.eventLoop.makeSucceededFuture(head.uri.hasPrefix(path) ? HTTPHeaders() : nil)
            },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture { try addFrameHandlers(channel, isClient: false, wire: wire()) }
            }
        )
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
        )
    }

    /// Client side: sends the upgrade request (with the stream header) once connected, then frames into `wire`. An
    /// upgrade unanswered for `upgradeTimeout` closes the connection (the heartbeat only starts once it is up).
    static func configureClient(
        _ channel: any Channel,
        host: String,
        stream: String,
        upgradeTimeout: TimeAmount,
        wire: @escaping @Sendable () -> WireHandler
    ) throws {
        let upgrader = NIOWebSocketClientUpgrader(
            maxFrameSize: maxMessage,
            upgradePipelineHandler: { channel, _ in
                channel.pipeline.removeHandler(name: UpgradeRequestHandler.name).flatMap {
                    channel.eventLoop.makeCompletedFuture { try addFrameHandlers(channel, isClient: true, wire: wire()) }
                }
            }
        )
        try channel.pipeline.syncOperations.addHTTPClientHandlers(
            withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in })
        )
        try channel.pipeline.syncOperations.addHandler(
            UpgradeRequestHandler(host: host, stream: stream, timeout: upgradeTimeout),
            name: UpgradeRequestHandler.name
        )
    }

    private static func addFrameHandlers(_ channel: any Channel, isClient: Bool, wire: WireHandler) throws {
        try channel.pipeline.syncOperations.addHandlers([
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0,
                maxAccumulatedFrameCount: 1024,
                maxAccumulatedFrameSize: maxMessage
            ),
            WebSocketLineBridge(isClient: isClient),
            wire,
        ])
    }
}

/// Sends the client's upgrade request when the connection opens; an answer that is not an upgrade closes it, and so
/// does none within `timeout`: an upgrade caught by a dead path (a partition) would otherwise wait as long as the
/// path is dead, since the heartbeat only starts once the WebSocket is up.
final class UpgradeRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    static let name = "chaos.upgrade-request"
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let host: String
    private let stream: String
    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(host: String, stream: String, timeout: TimeAmount) {
        self.host = host
        self.stream = stream
        self.timeout = timeout
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        var headers = HTTPHeaders([("Host", host), ("Content-Length", "0"), (WebSocketTransport.streamHeader, stream)])
        headers.add(name: "User-Agent", value: "chaos-demo")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: WebSocketTransport.path, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A response that reaches this handler was not an upgrade: the server refused the WebSocket.
        context.close(promise: nil)
    }
}
