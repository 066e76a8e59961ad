import ChaosProxy
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// One HTTP connection of the control API: collects a request (bounded, in time), lets ``ControlAPI`` answer it.
final class ControlAPIHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let api: ControlAPI
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    /// Set once the connection is being answered with an error and closed: nothing more is read.
    private var refusing = false
    /// Closes the connection when a request has not arrived whole in time.
    private var deadline: Scheduled<Void>?
    /// After a refusal's answer, the latest the connection lingers (see ``linger(context:)``), and its close.
    private var lingerEnd: NIODeadline?
    private var lingerClose: Scheduled<Void>?
    /// A live page's stream of figures (`GET /ui/events`): its pushes, and whether one is being made.
    private var pushes: RepeatedTask?
    private var pushing = false

    init(api: ControlAPI) { self.api = api }

    func handlerAdded(context: ChannelHandlerContext) { armDeadline(context: context) }
    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        lingerClose?.cancel()
        pushes?.cancel()
        if pushes != nil { _ = api.liveStreams.withLock { $0.removeValue(forKey: ObjectIdentifier(context.channel)) } }
    }

    private func armDeadline(context: ChannelHandlerContext) {
        deadline?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: ControlAPI.requestTimeout) {
            let (handler, context) = loopBound.value
            // An idle connection (no request begun) is closed without an answer: HTTP has nothing to answer there,
            // and NIO's pipeline handler stops the process on a response to no request.
            guard handler.head != nil else {
                handler.refusing = true
                context.close(promise: nil)
                return
            }
            handler.refuse(
                context: context,
                status: .requestTimeout,
                message: "the request did not arrive whole within \(ControlAPI.requestTimeout.nanoseconds / 1_000_000_000) s"
            )
        }
    }

    /// Answers with an error and closes, using nothing more it reads.
    private func refuse(context: ChannelHandlerContext, status: HTTPResponseStatus, message: String) {
        guard !refusing else { return }
        refusing = true
        deadline?.cancel()
        respond(context: context, response: .error(message, status: status), keepAlive: false, linger: true)
    }

    /// Once a refusal is answered while its client may still be sending (a body over the limit), the output is shut
    /// (FIN) and what the client still sends is read and dropped, so that its kernel is not reset with the answer
    /// unread, as closing a socket with unread bytes does (nginx's lingering close). The connection is closed when the
    /// client closes, has been quiet for ``ControlAPI/lingerQuiet``, or after ``ControlAPI/lingerLongest`` in all.
    private func linger(context: ChannelHandlerContext) {
        lingerEnd = .now() + ControlAPI.lingerLongest
        context.close(mode: .output, promise: nil)
        extendLinger(context: context)
    }

    private func extendLinger(context: ChannelHandlerContext) {
        guard let lingerEnd else { return }
        lingerClose?.cancel()
        let channel = context.channel
        lingerClose = context.eventLoop.scheduleTask(deadline: min(.now() + ControlAPI.lingerQuiet, lingerEnd)) {
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refusing else { return extendLinger(context: context) }
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
            if let length = head.headers.first(name: "Content-Length").flatMap(Int.init), length > ControlAPI.maxBody {
                refuse(
                    context: context,
                    status: .payloadTooLarge,
                    message: "the request body is \(length) bytes; the most the API reads is \(ControlAPI.maxBody)"
                )
            }
        case .body(var chunk):
            guard body.readableBytes + chunk.readableBytes <= ControlAPI.maxBody else {
                return refuse(
                    context: context,
                    status: .payloadTooLarge,
                    message: "the request body is over \(ControlAPI.maxBody) bytes, the most the API reads"
                )
            }
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            self.head = nil
            deadline?.cancel()
            let connection = ObjectIdentifier(context.channel)
            api.answering(connection, true)
            let text = String(buffer: body)
            let path = String(head.uri.split(separator: "?").first ?? "")
            guard api.access.admits(path: path, authorization: head.headers.first(name: "Authorization")) else {
                api.answering(connection, false)
                var response = APIResponse.error(
                    "this API requires a bearer token: Authorization: Bearer <the token of --api-token-file>",
                    status: .unauthorized
                )
                response.extraHeaders = [("WWW-Authenticate", "Bearer")]
                respond(context: context, response: response, keepAlive: head.isKeepAlive)
                if head.isKeepAlive { armDeadline(context: context) }
                return
            }
            if head.method == .GET, path == "/ui/events", let state = api.extras.liveState {
                // A stream for as long as the page is open: it waits for no answer, so another connection may take its slot.
                api.answering(connection, false)
                return stream(context: context, state: state)
            }
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let api = self.api
            let keepAlive = head.isKeepAlive
            Task {
                let query = head.uri.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
                let response = await api.handle(method: head.method, path: path, query: query, body: text)
                loopBound.eventLoop.execute {
                    let (handler, context) = loopBound.value
                    handler.respond(context: context, response: response, keepAlive: keepAlive)
                    api.answering(connection, false)
                    if keepAlive { handler.armDeadline(context: context) }
                }
            }
        }
    }

    /// How often the live page's figures are pushed.
    static let pushEvery = TimeAmount.seconds(1)

    /// `GET /ui/events`: Server-Sent Events, an `event: state` with the figures (``ControlAPI/Extras/liveState``) at
    /// once and every ``pushEvery``, until the page goes. A page that reads slower than that is skipped a push rather
    /// than queued one (the figures are a snapshot: the next one says it all); nothing more is read from it.
    private func stream(context: ChannelHandlerContext, state: @escaping @Sendable () -> String) {
        refusing = true
        let channel = context.channel
        api.liveStreams.withLock { $0[ObjectIdentifier(channel)] = channel }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Accel-Buffering", value: "no")
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        pushes = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: Self.pushEvery) { _ in
            let (handler, context) = loopBound.value
            guard !handler.pushing, context.channel.isActive, context.channel.isWritable else { return }
            handler.pushing = true
            Task {
                // The figures are made off the event loop: at a fleet's size they take a moment.
                let text = "event: state\ndata: " + state().trimmingCharacters(in: .newlines) + "\n\n"
                loopBound.eventLoop.execute {
                    let (handler, context) = loopBound.value
                    handler.pushing = false
                    guard context.channel.isActive else { return }
                    context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
                }
            }
        }
    }

    private func respond(context: ChannelHandlerContext, response: APIResponse, keepAlive: Bool, linger: Bool = false) {
        var headers = HTTPHeaders()
        let length = response.bytes?.count ?? response.body.utf8.count
        if length > 0 { headers.add(name: "Content-Type", value: response.contentType) }
        headers.add(name: "Content-Length", value: "\(length)")
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        for (name, value) in response.extraHeaders { headers.add(name: name, value: value) }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
        if let bytes = response.bytes {
            if !bytes.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes)))), promise: nil) }
        } else if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: response.body)))), promise: nil)
        }
        let channel = context.channel
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if linger {
                let (handler, context) = loopBound.value
                handler.linger(context: context)
            } else if !keepAlive {
                channel.close(promise: nil)
            }
        }
    }
}

@available(*, unavailable)
extension ControlAPIHandler: Sendable {}
