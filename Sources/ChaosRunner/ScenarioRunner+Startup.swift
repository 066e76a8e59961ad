import ChaosCapture
import ChaosCore
import ChaosProtocols
import ChaosProxy
import Foundation
import NIOCore
import NIOPosix

/// Starting the parts of a run that the services then keep: the capture, the proxies, the pair.
extension ScenarioRunner {
    func startCapture(folder: RunFolder?, startedAt: Date, sink: RunSink) throws -> CaptureWriter? {
        let scenario = configuration.scenario
        guard let folder, configuration.capture ?? scenario.capture?.enabled ?? false else { return nil }
        let writer = try CaptureWriter(
            directory: folder.url.path,
            ringBytes: scenario.capture?.ringBytes.map { Int($0) },
            startedAt: startedAt.timeIntervalSince1970,
            decryptedProxies: Set(scenario.proxies.filter { $0.tls != nil }.map(\.name))
        )
        sink.add { writer.record($0) }
        return writer
    }

    func startProxies(factory: ProxyFactory) async throws -> [ProxyServer] {
        var proxies: [ProxyServer] = []
        for spec in configuration.scenario.proxies {
            let proxy = factory.make(spec)
            do {
                try await proxy.start()
            } catch let error as ChaosError {
                for started in proxies { await started.stop() }
                throw ChaosError(.badInput, error.message + " (is the port in use?)")
            }
            proxies.append(proxy)
            if configuration.disabledProxies.contains(spec.name) { await proxy.disable() }
            output(
                "proxy \(spec.name): listening on \(spec.transport.prefix)\(proxy.boundAddress.map(\.hostPort) ?? "\(spec.listen)") -> \(spec.upstreamText)"
            )
        }
        return proxies
    }

    /// The factory of the run's proxies (the scenario's, and the control API's).
    func proxyFactory(loops: RelayLoops, clock: RunClock, sink: RunSink?, keyLog: KeyLogFile? = nil) -> ProxyFactory {
        var options = ProxyServer.Options()
        if let keyLog { options.keyLog = { @Sendable line in keyLog.append(line) } }
        options.busyPolling = loops.busyPolling
        options.epollRelay = loops.epollRelay
        options.frames = configuration.frames ?? ProtocolRegistry.plugin(followedBy: configuration.scenario)
        return ProxyFactory(
            group: loops.group,
            sink: sink,
            clock: clock,
            seed: SeededGenerator(seed: configuration.timeline.seed),
            baseline: configuration.scenario.baseline,
            options: options,
            logger: logger
        )
    }

    /// The scenario's pair, not started yet (``PairService`` starts it); nil when the scenario names none.
    func makePair(proxies: [ProxyServer], folder: RunFolder?, clock: RunClock) -> PairSupervisor? {
        guard let pairSpec = configuration.scenario.pair, let first = proxies.first else { return nil }
        let directory = folder?.url ?? FileManager.default.temporaryDirectory.appendingPathComponent("chaos-pair-\(getpid())")
        let values = [
            "listen.port": "\(first.boundAddress?.port ?? first.spec.listen.port)", "listen.host": first.spec.listen.host,
            "upstream.port": "\(first.spec.upstream.port)", "upstream.host": first.spec.upstream.host,
            "run_dir": directory.path, "seed": "\(configuration.timeline.seed)",
            // The scenario file's folder, absolute: files a pair needs beside its scenario, wherever chaos runs from.
            "scenario_dir": URL(fileURLWithPath: configuration.scenario.file).deletingLastPathComponent().standardizedFileURL.path,
        ]
        return PairSupervisor(
            pair: pairSpec,
            values: values,
            directory: directory,
            selfPath: configuration.selfPath,
            now: { clock.now() },
            connections: { proxies.map(\.counters.opened).reduce(0, +) },
            proxyPorts: { Set(proxies.filter { $0.spec.transport == .tcp }.compactMap { $0.boundAddress?.port }) }
        )
    }
}

/// The threads the proxies relay on: NIO's event loops (with busy polling) and the epoll relay threads.
struct RelayLoops: Sendable {
    let group: MultiThreadedEventLoopGroup
    let busyPolling: BusyPolling?
    let epollRelay: EpollRelayLoopGroup?

    /// Starts one event loop and (unless turned off) one epoll relay thread per core.
    static func start(busyPoll: ChaosDuration, epollRelay: Bool) async throws -> RelayLoops {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, System.coreCount))
        let busyPolling = await BusyPolling.start(on: group, window: .nanoseconds(busyPoll.nanoseconds))
        do {
            let relay = epollRelay ? try EpollRelayLoopGroup(threads: System.coreCount, busyPoll: .nanoseconds(busyPoll.nanoseconds)) : nil
            return RelayLoops(group: group, busyPolling: busyPolling, epollRelay: relay)
        } catch {
            try? await group.shutdownGracefully()
            busyPolling?.close()
            throw ChaosError(.network, "cannot start the relay threads: \(error)")
        }
    }

    /// Stops every relay thread and event loop.
    func stop() async {
        epollRelay?.shutdown()
        try? await group.shutdownGracefully()
        busyPolling?.close()
    }
}
