import ChaosCore
import Foundation
public import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The HTTP control API of `chaos proxy --api HOST:PORT`, for driving faults from test code
/// (Toxiproxy-style). JSON in and out:
///
/// - `GET /proxies`: the proxies, their live connections and bytes moved.
/// - `GET /faults`: the faults applied through the API and still active.
/// - `POST /faults` with one fault as a scenario writes it, e.g. `{"latency": {"add": "100ms", "direction": "downstream"}}`
///   or `{"disconnect": {"at": "0s", "mode": "reset"}}`: applies it now (a fault with no `for` lasts until deleted).
///   Answers `201 {"id": N, "timeline": [...]}`.
/// - `DELETE /faults/N`: lifts one; `DELETE /faults`: lifts all.
///
/// Bad requests get `400 {"error": "…"}` naming what is wrong and where. A body over 1 MiB gets 413 and the
/// connection is closed without reading on; at most ``maxConnections`` API connections are served at once
/// (more are closed at once); a request not complete within ``requestTimeout`` gets 408 and is closed.
public final class ControlAPI: Sendable {
    /// The largest request body read.
    public static let maxBody = 1 << 20
    /// The most API connections served at once.
    public static let maxConnections = 64
    /// How long a request may take to arrive, from its first byte (or the connection's start) to its end.
    public static let requestTimeout = TimeAmount.seconds(10)
    private let connections = Atomic<Int>(0)
    private let proxies: [ProxyServer]
    private let group: any EventLoopGroup
    private let seed: UInt64
    private let state = Mutex<(next: Int, active: [Int: (rule: String, task: Task<Void, Never>)], channel: (any Channel)?)>(
        (1, [:], nil))

    /// An API over `proxies`; faults draw their parameters from `seed`.
    public init(proxies: [ProxyServer], group: any EventLoopGroup, seed: UInt64 = 0) {
        self.proxies = proxies
        self.group = group
        self.seed = seed
    }

    /// Listens on `address`; returns the bound address (`host:port`).
    public func start(host: String, port: Int) async throws -> String {
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { [self] child in
                    guard connections.wrappingAdd(1, ordering: .relaxed).newValue <= Self.maxConnections else {
                        connections.wrappingSubtract(1, ordering: .relaxed)
                        return child.close()
                    }
                    child.closeFuture.whenComplete { [self] _ in connections.wrappingSubtract(1, ordering: .relaxed) }
                    return child.eventLoop.makeCompletedFuture {
                        try child.pipeline.syncOperations.configureHTTPServerPipeline()
                        try child.pipeline.syncOperations.addHandler(ControlAPIHandler(api: self))
                    }
                }
                .bind(host: host, port: port).get()
        } catch {
            throw ChaosError(.badInput, "control API: cannot listen on \(host):\(port): \(error) (is the port in use?)")
        }
        state.withLock { $0.channel = channel }
        return channel.localAddress?.hostPort ?? "\(host):\(port)"
    }

    /// Lifts every API fault and stops listening.
    public func stop() async {
        let (channel, tasks) = state.withLock { state in
            defer { state.active = [:]; state.channel = nil }
            return (state.channel, state.active.values.map(\.task))
        }
        for task in tasks { task.cancel(); await task.value }
        try? await channel?.close()
    }

    /// Answers one request: (status, JSON body).
    func handle(method: HTTPMethod, path: String, body: String) async -> (HTTPResponseStatus, String) {
        let parts = path.split(separator: "/").map(String.init)
        switch (method, parts.first, parts.count) {
        case (.GET, "proxies", 1):
            let list = proxies.map { proxy -> [String: Any] in
                ["name": proxy.spec.name, "listen": proxy.boundAddress?.hostPort ?? "\(proxy.spec.listen)",
                 "upstream": "\(proxy.spec.upstream)", "connections": proxy.liveConnections.count,
                 "bytes_upstream": proxy.counters.upstream, "bytes_downstream": proxy.counters.downstream]
            }
            return (.ok, Self.json(["proxies": list]))
        case (.GET, "faults", 1):
            let active = state.withLock { $0.active.map { ["id": $0.key, "fault": $0.value.rule] as [String: Any] } }
            return (.ok, Self.json(["faults": active.sorted { ($0["id"] as? Int ?? 0) < ($1["id"] as? Int ?? 0) }]))
        case (.POST, "faults", 1):
            return await addFault(body)
        case (.DELETE, "faults", 1):
            let tasks = state.withLock { state in defer { state.active = [:] }; return state.active.values.map(\.task) }
            for task in tasks { task.cancel(); await task.value }
            return (.ok, Self.json(["lifted": tasks.count]))
        case (.DELETE, "faults", 2):
            guard let id = Int(parts[1]) else { return (.badRequest, Self.error("fault id must be a number, found '\(parts[1])'")) }
            guard let task = state.withLock({ $0.active.removeValue(forKey: id)?.task }) else {
                return (.notFound, Self.error("no active fault \(id)"))
            }
            task.cancel()
            await task.value
            return (.ok, Self.json(["lifted": 1]))
        default:
            return (.notFound, Self.error("no route \(method) \(path); routes: GET /proxies, GET /faults, POST /faults, "
                + "DELETE /faults, DELETE /faults/ID"))
        }
    }

    /// How long an API fault lasts when it is not deleted: as long as any run may (its timeline is drawn
    /// lazily, so a fault every millisecond costs no memory ahead of time).
    static let forever = Scenario.longestDuration

    /// Draws a fault the way a scenario's are drawn (the same parser, rules and timeline), from the API's
    /// seed forked by the fault's id; its shaping is keyed by that id, apart from the run's own.
    private func addFault(_ body: String) async -> (HTTPResponseStatus, String) {
        let specs = proxies.map(\.spec)
        let rule: FaultRule
        do {
            rule = try FaultRule.parse(body, proxies: specs, duration: Self.forever, source: "request body")
            try rule.checkInvariants(source: "request body", proxies: Set(specs.map(\.name)))
        } catch let error as ChaosError {
            return (.badRequest, Self.error(error.description))
        } catch {
            return (.badRequest, Self.error("\(error)"))
        }
        let id = state.withLock { state -> Int in defer { state.next += 1 }; return state.next }
        var generator = SeededGenerator(seed: seed).fork("api", UInt64(id))
        let timeline = Timeline(rules: [rule], seed: generator.next(), duration: Self.forever)
        let lines = timeline.lines(first: 20)
        let startsNow = timeline.prefix(1).contains { $0.at == .zero }
        let injector = FaultInjector(timeline: timeline, number: id, proxies: proxies, clock: RunClock(), sink: nil)
        let task = Task { await injector.run() }
        state.withLock { $0.active[id] = (body.trimmingCharacters(in: .whitespacesAndNewlines), task) }
        // Answer once what starts now has been applied.
        for _ in 0..<200 where startsNow && injector.appliedSoFar.isEmpty {
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return (.created, Self.json(["id": id, "timeline": lines]))
    }

    static func json(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// An error body; a message quoting a huge request is cut (the client sent the rest, it needs no echo).
    static func error(_ message: String) -> String {
        json(["error": message.count > 500 ? String(message.prefix(500)) + "… (cut)" : message])
    }
}

/// One HTTP connection of the control API: collects a request, lets ``ControlAPI`` answer it.
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

    init(api: ControlAPI) { self.api = api }

    func handlerAdded(context: ChannelHandlerContext) { armDeadline(context: context) }
    func handlerRemoved(context: ChannelHandlerContext) { deadline?.cancel() }

    private func armDeadline(context: ChannelHandlerContext) {
        deadline?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: ControlAPI.requestTimeout) {
            let (handler, context) = loopBound.value
            handler.refuse(context: context, status: .requestTimeout,
                           message: "the request did not arrive whole within \(ControlAPI.requestTimeout.nanoseconds / 1_000_000_000) s")
        }
    }

    /// Answers with an error and closes, reading nothing more.
    private func refuse(context: ChannelHandlerContext, status: HTTPResponseStatus, message: String) {
        guard !refusing else { return }
        refusing = true
        deadline?.cancel()
        respond(context: context, status: status, json: ControlAPI.error(message), keepAlive: false)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refusing else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
            if let length = head.headers.first(name: "Content-Length").flatMap(Int.init), length > ControlAPI.maxBody {
                refuse(context: context, status: .payloadTooLarge,
                       message: "the request body is \(length) bytes; the most the API reads is \(ControlAPI.maxBody)")
            }
        case .body(var chunk):
            guard body.readableBytes + chunk.readableBytes <= ControlAPI.maxBody else {
                return refuse(context: context, status: .payloadTooLarge,
                              message: "the request body is over \(ControlAPI.maxBody) bytes, the most the API reads")
            }
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            deadline?.cancel()
            let text = String(buffer: body)
            let path = String(head.uri.split(separator: "?").first ?? "")
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let api = self.api
            let keepAlive = head.isKeepAlive
            Task {
                let (status, json) = await api.handle(method: head.method, path: path, body: text)
                loopBound.eventLoop.execute {
                    let (handler, context) = loopBound.value
                    handler.respond(context: context, status: status, json: json, keepAlive: keepAlive)
                    if keepAlive { handler.armDeadline(context: context) }
                }
            }
        }
    }

    private func respond(context: ChannelHandlerContext, status: HTTPResponseStatus, json: String, keepAlive: Bool) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(json.utf8.count + 1)")
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: json + "\n")))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}

@available(*, unavailable)
extension ControlAPIHandler: Sendable {}
