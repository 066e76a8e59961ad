package import ChaosCore
package import ChaosProxy
import Foundation
package import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The HTTP control API of `chaos proxy --api HOST:PORT`: Toxiproxy's API, so that test suites written
/// for Toxiproxy (toxiproxy-python, the Go and Ruby clients, toxiproxy-cli) drive chaos unchanged, plus
/// chaos's own faults and live metrics on the same port. One router (``handle(method:path:body:)``):
///
/// - Toxiproxy's: `GET/POST /proxies`, `GET/POST/DELETE /proxies/{name}`, `GET/POST /proxies/{name}/toxics`,
///   `GET/POST/DELETE /proxies/{name}/toxics/{toxic}`, `POST /reset`, `POST /populate`, `GET /version`, with
///   its JSON shapes and status codes (201 proxy created, 200 toxic created, 204 deleted, 404 unknown,
///   409 exists, 400 bad input as `{"error": "…", "status": 400}`).
/// - chaos's: `GET /faults`; `POST /faults` with one fault as a scenario writes it (answers
///   `201 {"id": N, "timeline": [...]}`); `DELETE /faults/N`, `DELETE /faults`; `GET /metrics` (Prometheus text);
///   `GET /report` (the live audit, when the run audits: ``Extras``); a fleet agent's `GET /events?since=`,
///   `GET /run/{scenario,timeline,report}.json` and `GET /clock` (ControlAPI+Events.swift).
///
/// Requests are answered one at a time, in the order they arrive. A body over 1 MiB gets 413 and the
/// connection is closed without reading on; a request not complete within ``requestTimeout`` gets 408 and is
/// closed. At most ``maxConnections`` API connections are served at once: a new one past that takes the place
/// of the one that has waited longest without a request being answered (``ConnectionSlots``), so slow,
/// never-finished connections cannot lock a real client out; it is closed at once only when every slot is busy
/// answering.
package final class ControlAPI: Sendable {
    /// The largest request body read.
    package static let maxBody = 1 << 20
    /// The most API connections served at once.
    package static let maxConnections = 64
    /// How long a request may take to arrive, from its first byte (or the connection's start) to its end.
    package static let requestTimeout = TimeAmount.seconds(10)
    /// After refusing a request it was still receiving, how long the API keeps reading (and dropping) what its client
    /// sends once the client is quiet, and at most in all (``ControlAPIHandler``'s lingering close, nginx's 5 s / 30 s).
    package static let lingerQuiet = TimeAmount.seconds(5)
    package static let lingerLongest = TimeAmount.seconds(30)
    /// What `GET /version` answers: Toxiproxy's API version this one follows.
    package static let version = "2.12.0-chaos"

    /// The API's connections and their slots.
    let connections = Mutex(Connections())
    let factory: ProxyFactory
    let seed: UInt64
    let extras: Extras
    /// The faults by kind (the run's, the API's and the toxics): ``Extras/faults``, or the API's own.
    let faultTally: FaultTally
    /// Who may use it (``APIAccess``).
    package let access: APIAccess
    let state: Mutex<State>
    /// The request being answered: the next one waits for it.
    private let tail = Mutex<Task<Void, Never>?>(nil)
    /// The live pages' streams of figures (`GET /ui/events`), closed when the API stops (their figures end with the run).
    let liveStreams = Mutex<[ObjectIdentifier: any Channel]>([:])

    /// What the run adds to the API when it audits (`--protocol-from`): the live report and the audit's metrics.
    package struct Extras: Sendable {
        /// `GET /report`: the audit so far, as report.json; nil: 404.
        package var report: (@Sendable () -> String)?
        /// Prometheus families appended to `GET /metrics`.
        package var metrics: (@Sendable () -> String)?
        /// A fleet agent's run folder (`chaos run --agent`): `GET /events` pages its events.bin ring, `GET /run/NAME`
        /// serves its scenario.json, timeline.json and (once written) report.json; nil: 404.
        package var agentFolder: String?
        /// Whether the agent has written its last event (then a page that ends the last segment says so).
        package var agentFinished: (@Sendable () -> Bool)?
        /// How long the run lasts on its clock (`chaos run`'s duration, `chaos proxy --duration`): a fault posted to
        /// begin or go on past it is refused, as a scenario file refuses one past its run. nil: no end but the API's
        /// ten years.
        package var runLength: ChaosDuration?
        /// The live page's figures as JSON (`GET /ui/state`, pushed every second on `GET /ui/events`); nil: the API
        /// serves no run, and the page says so.
        package var liveState: (@Sendable () -> String)?
        /// A page of the run's streams, worst first, those whose names contain the search (`GET /ui/streams`).
        package var liveStreams: (@Sendable (_ page: Int, _ search: String) -> String)?
        /// The run's fault schedule, paused and resumed by `POST /schedule/pause|resume`; nil: 404.
        package var schedule: FaultSchedule?
        /// Stops the run as Ctrl-C does (`POST /stop`); nil: 404.
        package var stop: (@Sendable () async -> Void)?
        /// Where what people do through the API is written down for the report (pauses, faults, a stop).
        package var manual: ManualActions?
        /// The addresses of the fleet's other agents' control APIs, which the live page links to.
        package var fleetPeers: [String] = []
        /// Where the run's own injector counts its faults by kind: `GET /metrics` adds the API's faults and toxics to it
        /// and shows them together. nil: the API keeps a tally of its own.
        package var faults: FaultTally?

        /// Extras; none by default.
        package init(report: (@Sendable () -> String)? = nil, metrics: (@Sendable () -> String)? = nil) {
            self.report = report
            self.metrics = metrics
        }
    }

    /// A proxy the API knows: the run's own, or one created through the API.
    struct Managed: Sendable {
        var server: ProxyServer
        /// What the client asked for (`listen` may say port 0; the proxy shows the bound one).
        var spec: ProxySpec
        var enabled = true
        var toxics: [ManagedToxic] = []
        /// Whether the API made it (and so stops it); the run stops its own.
        var owned = true
    }

    /// A toxic on a proxy, with the key that names its shaping and its fault mark in the event stream.
    struct ManagedToxic: Sendable {
        var toxic: Toxic
        var key: ShapingKey
        var proxy: String
        var mark: FaultMark {
            FaultMark(
                kind: toxic.type,
                occurrence: FaultMark.apiOccurrence(id: key.timeline, index: 0),
                detail: "toxic \(toxic.name) on \(proxy): " + toxic.summary,
                proxy: proxy
            )
        }
    }

    struct Connections: Sendable {
        var slots = ConnectionSlots<ObjectIdentifier>(capacity: ControlAPI.maxConnections)
        var channels: [ObjectIdentifier: any Channel] = [:]
    }

    struct State: Sendable {
        /// The next id for a fault or a toxic (they share the keys of their shaping).
        var next = 1
        var faults: [Int: (rule: String, task: Task<Void, Never>)] = [:]
        var channel: (any Channel)?
        /// Proxy names in the order they were made.
        var order: [String] = []
        var proxies: [String: Managed] = [:]

        var servers: [ProxyServer] { order.compactMap { proxies[$0]?.server } }

        mutating func nextID() -> Int {
            defer { next += 1 }
            return next
        }
    }

    /// An API over the run's `proxies`; new ones come from `factory`; faults and toxicity draws come from `seed`.
    package init(proxies: [ProxyServer], factory: ProxyFactory, seed: UInt64 = 0, extras: Extras = Extras(), access: APIAccess = .open) {
        self.access = access
        self.factory = factory
        self.extras = extras
        self.faultTally = extras.faults ?? FaultTally()
        self.seed = seed
        var state = State()
        for proxy in proxies {
            state.order.append(proxy.spec.name)
            state.proxies[proxy.spec.name] = Managed(server: proxy, spec: proxy.spec, enabled: !proxy.isRefusing, owned: false)
        }
        self.state = Mutex(state)
    }

    /// An API over `proxies` with a factory of its own (tests).
    package convenience init(proxies: [ProxyServer], group: any EventLoopGroup, seed: UInt64 = 0, extras: Extras = Extras()) {
        self.init(
            proxies: proxies,
            factory: ProxyFactory(group: group, sink: nil, clock: RunClock(), seed: SeededGenerator(seed: seed)),
            seed: seed,
            extras: extras
        )
    }

    /// Whether it serves a run's live page (`GET /ui` with figures behind it).
    package var servesLivePage: Bool { extras.liveState != nil }

    /// Listens on `host:port`; returns the bound address (`host:port`).
    package func start(host: String, port: Int) async throws -> String {
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: factory.group)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { [self] child in
                    guard admit(child) else { return child.close() }
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

    /// Lifts every API fault and toxic, stops the proxies the API made, and stops listening.
    package func stop() async {
        let (channel, tasks) = state.withLock { state in
            defer {
                state.faults = [:]
                state.channel = nil
            }
            return (state.channel, state.faults.values.map(\.task))
        }
        try? await channel?.close()
        for stream in liveStreams.withLock({ $0.values }) { try? await stream.close() }
        for task in tasks {
            task.cancel()
            await task.value
        }
        await serialized { [self] in
            let proxies = state.withLock { state in
                defer {
                    state.proxies = [:]
                    state.order = []
                }
                return state.order.compactMap { state.proxies[$0] }
            }
            for proxy in proxies {
                // Their marks end with the API; a disabled proxy stays so (the run is ending).
                for toxic in proxy.toxics { await removeToxic(toxic, from: proxy.server) }
                // The run's own proxies are stopped by the run; the API's are stopped here.
                if proxy.owned { await proxy.server.stop() }
            }
            return ()
        }
    }

    /// Gives `child` a slot (closing the connection that waited longest when all are taken); false: refuse it.
    private func admit(_ child: any Channel) -> Bool {
        let key = ObjectIdentifier(child)
        let (admitted, evicted) = connections.withLock { connections -> (Bool, (any Channel)?) in
            switch connections.slots.admit(key) {
            case .refuse: return (false, nil)
            case .admit:
                connections.channels[key] = child
                return (true, nil)
            case .admitEvicting(let oldest):
                connections.channels[key] = child
                return (true, connections.channels.removeValue(forKey: oldest))
            }
        }
        guard admitted else { return false }
        evicted?.close(promise: nil)
        child.closeFuture.whenComplete { [self] _ in
            connections.withLock { connections in
                connections.slots.remove(key)
                connections.channels.removeValue(forKey: key)
            }
        }
        return true
    }

    /// A connection's request is being answered (true) or it waits for its next one (false).
    func answering(_ connection: ObjectIdentifier, _ busy: Bool) {
        connections.withLock { busy ? $0.slots.beginAnswering(connection) : $0.slots.endAnswering(connection) }
    }

    /// Runs `body` once every request before it has been answered.
    func serialized<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let task = tail.withLock { tail -> Task<T, Never> in
            let previous = tail
            let task = Task {
                await previous?.value
                return await body()
            }
            tail = Task { _ = await task.value }
            return task
        }
        return await task.value
    }

    /// Records a fault mark in the run's event stream (so that API faults and toxics show in the report).
    func record(_ kind: TrafficEvent.Kind) {
        factory.sink?.record(TrafficEvent(time: factory.clock.now(), connection: 0, kind: kind))
    }
}
