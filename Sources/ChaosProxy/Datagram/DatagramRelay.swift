import ChaosCore
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A UDP proxy's relay: datagrams from each client address go to the upstream from a socket of the flow's own (as a
/// NAT maps them), and the upstream's answers to that socket go back to the client from the listening socket.
/// Nothing is unbounded: flows are capped (a new address past the cap is dropped, counted), each direction holds at
/// most ``ProxyServer/Options/maxHeldBytes`` for later sending, a flow's first datagrams wait for its socket in a
/// queue of ``pendingLimit``, and a datagram that finds the kernel's send buffer full is dropped. A flow with no
/// datagram either way for the idle timeout ends. Every method runs on ``loop``.
final class DatagramRelay: @unchecked Sendable {
    /// The most datagrams a new flow queues while its upstream socket opens.
    static let pendingLimit = 64
    /// The largest datagram read (UDP's own limit).
    static let largestDatagram = 65_536
    /// The listening socket's receive buffer (the system caps it at `net.core.rmem_max`): every client's datagrams wait
    /// there while the proxy's thread is not running, and the default 208 KiB holds only about 256 small ones, 26 ms of
    /// a client sending every 100 µs, so a loaded machine's scheduling lost datagrams no fault asked for (s81u1: 113).
    /// What waits is charged to the socket only while it waits.
    static let listenerReceiveBuffer: Int32 = 4 << 20
    /// The longest a `reorder` fault holds a datagram back waiting for a later one to overtake it (nanoseconds).
    static let longestHoldBack: Int64 = 200_000_000

    let loop: any EventLoop
    unowned let server: ProxyServer
    /// The socket clients send to; nil while the proxy refuses (a `refuse` fault closed it).
    var listener: (any Channel)?
    private var flows: [SocketAddress: DatagramFlow] = [:]
    private var byID: [ConnectionID: DatagramFlow] = [:]
    private var sweeper: RepeatedTask?
    /// The proxy stopped: flows the fast path hands over now end at once.
    private var isStopped = false
    /// The live flows' ids, readable from any thread.
    let liveIDs = Mutex<Set<ConnectionID>>([])
    private let recordsTraffic: Bool
    // The server's, held here: every datagram reads them (an `unowned` reference costs a check per read).
    private let clock: RunClock
    private let counters: ProxyCounters
    private let sink: (any TrafficEventSink)?
    /// The sockets written to since the loop last flushed them (see ``DatagramBatch``).
    private var batch: DatagramBatch
    /// The relay on an epoll relay thread, while nothing has touched the proxy's datagrams (``DatagramFastPath``).
    let fastPath = Mutex<DatagramFastPath?>(nil)
    /// The datagrams left the fast path: they never go back (a refuse fault's listening again stays here, with the
    /// flows).
    private let leftFastPath = Atomic<Bool>(false)

    init(server: ProxyServer, loop: any EventLoop) {
        self.server = server
        self.loop = loop
        clock = server.clock
        counters = server.counters
        sink = server.sink
        recordsTraffic = server.sink?.recordsTraffic == true
        // A write the kernel refused (or that found its socket closed) lost its datagrams: counted, as a full send buffer's.
        batch = DatagramBatch(segments: DatagramBatch.segmentsWanted(recording: recordsTraffic)) { [counters] count in
            counters.dropped(.sendBuffer, count: count)
        }
    }

    // MARK: the listening socket

    /// Binds the listening socket at `address` and starts the idle sweep: on an epoll relay thread while nothing
    /// touches the proxy's datagrams (``DatagramFastPath``), else here.
    func bind(_ address: SocketAddress) async throws -> ProxyServer.Listener {
        if let fast = try await fastPath(at: address) { return .datagramFastPath(fast) }
        let channel = try await listenerBootstrap().bind(to: address).get()
        try await listen(on: channel)
        return .nio(channel)
    }

    /// The fast path at `address`, when the proxy may start on it: epoll relay threads to run it, no audit or capture,
    /// nothing shaping new flows, the proxy's own source address, an upstream address known now.
    private func fastPath(at address: SocketAddress) async throws -> DatagramFastPath? {
        guard let loops = server.options.epollRelay, !recordsTraffic, !leftFastPath.load(ordering: .acquiring),
            let upstream = server.upstreamAddress
        else { return nil }
        let shaped = server.state.withLock { $0.baseline != nil || !$0.shaping.isEmpty || $0.sourceAddress != nil }
        guard !shaped else { return nil }
        let fast = try DatagramFastPath(listen: address, upstream: upstream, loop: loops.loops[0], server: server, relay: self)
        try await fast.start()
        fastPath.withLock { $0 = fast }
        return fast
    }

    /// The listening socket's bootstrap: every client's datagrams come in there, one `recvmmsg` taking up to
    /// ``DatagramBatch/vectorRead`` of them, each into a slot with room for UDP's largest (one buffer for the proxy,
    /// not per flow). No SO_REUSEADDR: on UDP it would let another socket with it bind the proxy's port (the system even
    /// hands such a socket the same port for port 0) and take the clients' datagrams (s81q1: 152 of a test's 2,000 went
    /// to another test's socket that shared the port, and were dropped at its full buffer).
    private func listenerBootstrap() -> DatagramBootstrap {
        DatagramBootstrap(group: loop)
            .channelOption(ChannelOptions.socketOption(.so_rcvbuf), value: SocketOptionValue(Self.listenerReceiveBuffer))
            .channelOption(
                ChannelOptions.recvAllocator,
                value: FixedSizeRecvByteBufferAllocator(capacity: Self.largestDatagram * DatagramBatch.vectorRead)
            )
            .channelOption(ChannelOptions.datagramVectorReadMessageCount, value: DatagramBatch.vectorRead)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(DatagramInbound { [self] envelope in fromClient(envelope) })
                }
            }
    }

    /// `channel` is the listening socket from now on; the idle sweep starts.
    private func listen(on channel: any Channel) async throws {
        try await loop.submit { [self] in
            listener = channel
            if sweeper == nil {
                let every = TimeAmount.nanoseconds(max(100_000_000, min(1_000_000_000, server.options.udpIdleTimeout / 4)))
                sweeper = loop.scheduleRepeatedTask(initialDelay: every, delay: every) { [self] _ in sweepIdle() }
            }
        }.get()
    }

    /// Takes the proxy's datagrams over from the fast path, before a fault touches them: its listening socket and each
    /// flow's socket, with its port (the mapping the server knows), go on here as they were. Returns the listening
    /// socket's channel (nil when there was no fast path, or it had stopped).
    func leaveFastPath() async -> (any Channel)? {
        guard let fast = fastPath.withLock({ $0 }) else { return nil }
        leftFastPath.store(true, ordering: .releasing)
        defer { fastPath.withLock { $0 = nil } }
        guard let detached = await fast.detach() else { return nil }
        // The flows first, so that the listening socket's first datagrams find them (not new flows from new ports).
        let adopted =
            (try? await loop.submit { [self] () -> Bool in
                guard !isStopped else { return false }
                let now = clock.now()
                for handed in detached.flows {
                    let flow = makeFlow(id: handed.id, client: handed.client, now: now)
                    flow.lastActivity = handed.lastActivity
                    adoptUpstream(flow, socket: handed.fd)
                }
                return true
            }.get()) ?? false
        guard adopted else {
            close(detached.listener)
            for flow in detached.flows { close(flow.fd) }
            liveIDs.withLock { $0.subtract(detached.flows.map(\.id)) }
            return nil
        }
        // NIO closes a socket it took and then failed to register; a number closed twice may name someone else's
        // socket by then, so what NIO took is closed through its channel, and the rest only while it is still ours.
        let listenerIdentity = RawSocket.identity(detached.listener)
        var taken: (any Channel)?
        do {
            let channel = try await listenerBootstrap().withBoundSocket(detached.listener).get()
            taken = channel
            try await listen(on: channel)
            return channel
        } catch {
            if let taken { try? await taken.close() } else { RawSocket.closeWithoutReset(detached.listener, ifStill: listenerIdentity) }
            try? await loop.submit { [self] in for flow in Array(byID.values) { end(flow) } }.get()
            server.logger.error("UDP flows could not move off the fast path", metadata: ["proxy.name": "\(server.spec.name)", "error": "\(error)"])
            return nil
        }
    }

    /// Ends every flow (the proxy stops). The fast path, if any, is stopped by its listener's close.
    func stop() {
        isStopped = true
        sweeper?.cancel()
        sweeper = nil
        for flow in Array(byID.values) { end(flow) }
        listener = nil
    }

    // MARK: flows

    private func openFlow(for client: SocketAddress, at now: Int64) -> DatagramFlow? {
        let options = server.options
        guard byID.count < options.maxFlows else {
            counters.dropped(.flowLimit)
            return nil
        }
        let id = server.ids.next()
        let flow = makeFlow(id: id, client: client, now: now)
        liveIDs.withLock { _ = $0.insert(id) }
        counters.connectionOpened()
        connectUpstream(flow)
        return flow
    }

    /// A flow numbered `id` for `client`, known by both, with the faults that reach it.
    private func makeFlow(id: ConnectionID, client: SocketAddress, now: Int64) -> DatagramFlow {
        let generator = server.seed.fork("connection", id)
        let shapers = [Side.server, .client].map {
            DatagramShaper(maxHeldBytes: server.options.maxHeldBytes, generator: generator.fork($0.rawValue))
        }
        let flow = DatagramFlow(id: id, client: client, shapers: shapers, path: ConnectionPath(proxyRadio: server.radio), now: now)
        flows[client] = flow
        byID[id] = flow
        let (baseline, shaping) = server.state.withLock { ($0.baseline, $0.shaping) }
        if let baseline { flow.effects[ShapingKey(timeline: Int.min, occurrence: 0)] = .link(baseline) }
        for (key, shaped) in shaping where shaped.reaches(id) { flow.effects[key] = shaped.effect }
        flow.applyEffects(at: now)
        if let sink {
            flow.path.onEvent = { [clock] _, event in sink.record(TrafficEvent(time: clock.now(), connection: id, kind: .path(event))) }
        }
        return flow
    }

    /// The fast path's socket of `flow` toward the upstream (its port the mapping) carries it on here.
    private func adoptUpstream(_ flow: DatagramFlow, socket fd: Int32) {
        guard let address = server.upstreamAddress else {
            close(fd)
            return end(flow)
        }
        flow.upstreamAddress = address
        let identity = RawSocket.identity(fd)
        upstreamBootstrap(for: flow, address: address).withBoundSocket(fd).whenComplete { [self] result in
            switch result {
            case .success(let channel):
                guard !flow.isClosed else { return channel.close(promise: nil) }
                flow.upstream = channel
                // What came while the socket moved passes now.
                let pending = flow.pending
                flow.pending = []
                for datagram in pending { arrived(datagram, from: .client, of: flow, at: clock.now()) }
            case .failure:
                RawSocket.closeWithoutReset(fd, ifStill: identity)
                end(flow)
            }
        }
    }

    /// The bootstrap of `flow`'s socket toward the upstream at `address`: it takes datagrams from that address only.
    private func upstreamBootstrap(for flow: DatagramFlow, address: SocketAddress) -> DatagramBootstrap {
        DatagramBootstrap(group: loop)
            .channelOption(ChannelOptions.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: Self.largestDatagram))
            .channelOption(ChannelOptions.maxMessagesPerRead, value: DatagramBatch.readsPerWakeUp)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        DatagramInbound { [self] envelope in
                            if envelope.remoteAddress == address { fromServer(envelope.data, flow: flow) }
                        }
                    )
                }
            }
    }

    /// Opens the flow's own socket toward the upstream: its local port is the mapping the server sees. The socket is
    /// not connected (a connected one takes a server's ICMP "port unreachable" for an error that ends it, and a server
    /// not yet listening is what a NAT's mapping outlives): it sends to the upstream's address and takes datagrams
    /// from that address only, as a NAT that filters by endpoint does.
    private func connectUpstream(_ flow: DatagramFlow) {
        let upstream = server.spec.upstream
        guard
            let address = flow.upstreamAddress ?? server.upstreamAddress
                ?? (try? SocketAddress.makeAddressResolvingHost(upstream.host, port: upstream.port))
        else {
            server.upstreamFailed(datagramFlow: flow.id, reason: "upstream udp://\(upstream): the host does not resolve")
            if flow.upstream == nil { end(flow) }
            return
        }
        flow.upstreamAddress = address
        let bootstrap = upstreamBootstrap(for: flow, address: address)
        // From the address a handoff's `new_address` gave the proxy (the phone's new network), when it is of the
        // upstream's family; else from the system's choice.
        let inet6 = address.protocol == .inet6
        let source = server.sourceAddress.flatMap { $0.contains(":") == inet6 ? $0 : nil }
        let binding = bootstrap.bind(host: source ?? (inet6 ? "::" : "0.0.0.0"), port: 0)
        binding.whenComplete { [self] result in
            switch result {
            case .success(let channel):
                guard !flow.isClosed else {
                    channel.close(promise: nil)
                    return
                }
                if let old = flow.upstream {
                    // A rebinding: the new mapping carries the flow from now on; the old port is gone.
                    flow.upstream = channel
                    old.close(promise: nil)
                    counters.flowRebound()
                    sink?.record(TrafficEvent(time: clock.now(), connection: flow.id, kind: .path(.rebound)))
                    return
                }
                flow.upstream = channel
                recordOpened(flow, upstream: channel)
                // What came while the socket opened passes now, after the flow's opening in the events.
                let pending = flow.pending
                flow.pending = []
                for datagram in pending { arrived(datagram, from: .client, of: flow, at: clock.now()) }
            case .failure(let error):
                server.upstreamFailed(datagramFlow: flow.id, reason: "upstream udp://\(upstream): \(error)")
                if flow.upstream == nil { end(flow) }  // a failed rebinding keeps the old mapping
            }
        }
    }

    private func recordOpened(_ flow: DatagramFlow, upstream: any Channel) {
        guard let sink else { return }
        let endpoints =
            recordsTraffic
            ? ConnectionEndpoints(
                proxy: server.spec.name,
                client: flow.client.hostPort,
                listen: listener?.localAddress?.hostPort ?? "?",
                proxyLocal: upstream.localAddress?.hostPort ?? "?",
                server: flow.upstreamAddress?.hostPort ?? "?"
            )
            : ConnectionEndpoints(proxy: server.spec.name, client: "", listen: "", proxyLocal: "", server: "")
        sink.record(TrafficEvent(time: clock.now(), connection: flow.id, kind: .opened(endpoints)))
    }

    /// Ends a flow: its socket is closed (the server's later answers to that port find nothing), both sides closed
    /// in the events, as `how` says.
    private func end(_ flow: DatagramFlow, how: TrafficEvent.CloseKind = .fin) {
        guard !flow.isClosed else { return }
        flow.isClosed = true
        flow.pending = []
        for index in flow.heldBack.indices {
            flow.heldBack[index]?.timer.cancel()
            flow.heldBack[index] = nil
        }
        flows[flow.client] = flows[flow.client] === flow ? nil : flows[flow.client]
        byID[flow.id] = nil
        flow.upstream?.close(promise: nil)
        // Its ends are recorded before it stops being live: a flow no longer listed has its closes in the events.
        if flow.upstream != nil { sink?.recordFlowEnded(flow.id, at: clock.now(), how: how) }
        liveIDs.withLock { _ = $0.remove(flow.id) }
    }

    /// Ends the flows idle for the idle timeout.
    private func sweepIdle() {
        let now = clock.now()
        let timeout = server.options.udpIdleTimeout
        for flow in Array(byID.values) where now - flow.lastActivity >= timeout { end(flow) }
    }

    // MARK: datagrams

    private func fromClient(_ envelope: AddressedEnvelope<ByteBuffer>) {
        let now = clock.now()
        var existing = flows[envelope.remoteAddress]
        if let current = existing, natForgot(current, at: now) {
            // The NAT forgot the mapping: the client's next datagram makes a new one, from a new port.
            end(current, how: .cutByFault)
            existing = nil
        }
        guard let flow = existing ?? openFlow(for: envelope.remoteAddress, at: now) else { return }
        guard flow.upstream != nil else {
            guard flow.pending.count < Self.pendingLimit else { return counters.dropped(.queue) }
            flow.pending.append(Self.kept(envelope.data))
            return
        }
        arrived(envelope.data, from: .client, of: flow, at: now)
    }

    private func fromServer(_ datagram: ByteBuffer, flow: DatagramFlow) {
        guard !flow.isClosed else { return }
        let now = clock.now()
        if natForgot(flow, at: now) {
            // An answer to a forgotten mapping goes nowhere; the flow ends.
            counters.dropped(.nat)
            end(flow, how: .cutByFault)
            return
        }
        arrived(datagram, from: .server, of: flow, at: now)
    }

    /// Whether a NAT watching the flow has forgotten it by `now` (reported once, as a TCP connection's death is).
    private func natForgot(_ flow: DatagramFlow, at now: Int64) -> Bool {
        guard let timeout = flow.natIdleTimeout else { return false }
        flow.path.natSaw(at: now, idleTimeout: timeout)
        return flow.path.isDead
    }

    private func arrived(_ datagram: ByteBuffer, from side: Side, of flow: DatagramFlow, at now: Int64) {
        flow.lastActivity = now
        let size = datagram.readableBytes
        counters.add(bytes: size, producedBy: side == .client)
        counters.datagramRead()
        if recordsTraffic, let sink {
            sink.record(TrafficEvent(time: now, connection: flow.id, kind: .read(side, Array(datagram.readableBytesView))))
        }
        let index = flow.shaperIndex(side.producing)
        switch flow.shapers[index].admit(size: size, at: now, radio: flow.path.radioAdmit) {
        case .drop(let reason):
            counters.dropped(reason)
        case .send(let at, let copies, let heldBack) where at <= now:
            release(datagram, to: side.other, of: flow, direction: index, copies: copies, heldBack: heldBack)
        case .send(let at, let copies, let heldBack):
            let delayed = Self.kept(datagram)
            loop.scheduleTask(in: .nanoseconds(at - now)) { [self] in
                flow.shapers[index].released(size: size)
                guard !flow.isClosed else {
                    if flow.path.isDead { counters.dropped(.nat) }
                    return
                }
                release(delayed, to: side.other, of: flow, direction: index, copies: copies, heldBack: heldBack)
            }
        }
    }

    /// A datagram's time has come: it goes `copies` times, and then the one held back in its direction (which it
    /// overtook); or, `heldBack`, it waits for the next one (or ``longestHoldBack``), letting go of any held before it.
    private func release(_ datagram: ByteBuffer, to side: Side, of flow: DatagramFlow, direction index: Int, copies: Int, heldBack: Bool) {
        if heldBack {
            releaseHeldBack(of: flow, direction: index)
            counters.altered(.heldBack)
            let timer = loop.scheduleTask(in: .nanoseconds(Self.longestHoldBack)) { [self] in
                releaseHeldBack(of: flow, direction: index)
            }
            flow.heldBack[index] = DatagramFlow.HeldDatagram(datagram: Self.kept(datagram), copies: copies, timer: timer)
            return
        }
        send(datagram, copies: copies, to: side, of: flow)
        releaseHeldBack(of: flow, direction: index)
    }

    /// Lets the datagram held back in direction `index` go.
    private func releaseHeldBack(of flow: DatagramFlow, direction index: Int) {
        guard let held = flow.heldBack[index] else { return }
        flow.heldBack[index] = nil
        held.timer.cancel()
        send(held.datagram, copies: held.copies, to: index == 0 ? .server : .client, of: flow)
    }

    private func send(_ datagram: ByteBuffer, copies: Int, to side: Side, of flow: DatagramFlow) {
        for copy in 0..<copies {
            let went = deliver(datagram, to: side, of: flow)
            if went, copy > 0 { counters.altered(.duplicated) }  // counted as it went, as the audit sees it
        }
    }

    /// Writes a datagram to `side` now, unless the kernel's send buffer toward it is full; returns whether it did.
    @discardableResult
    private func deliver(_ datagram: ByteBuffer, to side: Side, of flow: DatagramFlow) -> Bool {
        guard !flow.isClosed else { return false }
        switch side {
        case .server:
            guard let upstream = flow.upstream, let address = flow.upstreamAddress, upstream.isActive, upstream.isWritable else {
                counters.dropped(.sendBuffer)
                return false
            }
            write(AddressedEnvelope(remoteAddress: address, data: datagram), to: upstream)
        case .client:
            guard let listener, listener.isActive, listener.isWritable else {
                counters.dropped(.sendBuffer)
                return false
            }
            write(AddressedEnvelope(remoteAddress: flow.client, data: datagram), to: listener)
        }
        if recordsTraffic, let sink {
            let slot = side == .client ? 0 : 1
            flow.written[slot] += Int64(datagram.readableBytes)
            let now = clock.now()
            sink.record(TrafficEvent(time: now, connection: flow.id, kind: .written(side, Array(datagram.readableBytesView))))
            sink.record(TrafficEvent(time: now, connection: flow.id, kind: .acknowledged(side, upTo: flow.written[slot])))
        }
        return true
    }

    /// Writes `envelope` to `channel`, flushed with the rest of this turn of the loop's writes (``DatagramBatch``).
    private func write(_ envelope: AddressedEnvelope<ByteBuffer>, to channel: any Channel) {
        if batch.write(envelope, to: channel) { loop.execute { [self] in batch.flushAll() } }
    }

    /// A datagram kept past its read (waiting for its socket, delayed, held back) in a buffer of its own size: a read's
    /// buffer has room for the largest datagram, and held bytes are counted by what they carry.
    private static func kept(_ datagram: ByteBuffer) -> ByteBuffer {
        var copy = ByteBufferAllocator().buffer(capacity: datagram.readableBytes)
        copy.writeImmutableBuffer(datagram)
        return copy
    }

    // MARK: faults

    /// Shapes the given flows, or every flow when `ids` is nil (those `draw` reaches), with `effect` under `key`.
    /// Returns how many it reached.
    func addShaping(_ effect: FaultEffect, key: ShapingKey, to ids: [ConnectionID]?, draw: ConnectionDraw?) -> Int {
        let now = clock.now()
        var reached = 0
        for flow in ids.map({ $0.compactMap { byID[$0] } }) ?? Array(byID.values) where ids != nil || draw?.reaches(flow.id) ?? true {
            flow.effects[key] = effect
            flow.applyEffects(at: now)
            reached += 1
        }
        return reached
    }

    /// The given flows (all when nil) get a new upstream-facing socket; returns how many will (a flow still opening
    /// its first one is left alone).
    func rebind(_ ids: [ConnectionID]?) -> Int {
        let chosen = ids.map { $0.compactMap { byID[$0] } } ?? Array(byID.values)
        var rebinding = 0
        for flow in chosen where flow.upstream != nil && !flow.isClosed {
            connectUpstream(flow)
            rebinding += 1
        }
        return rebinding
    }

    /// Lifts the shaping named `key` from every flow.
    func removeShaping(key: ShapingKey) {
        let now = clock.now()
        for flow in byID.values where flow.effects.removeValue(forKey: key) != nil { flow.applyEffects(at: now) }
    }

}

/// Hands each datagram a channel reads to `received`.
final class DatagramInbound: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let received: (AddressedEnvelope<ByteBuffer>) -> Void

    init(_ received: @escaping (AddressedEnvelope<ByteBuffer>) -> Void) { self.received = received }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { received(unwrapInboundIn(data)) }

    /// A datagram socket's errors (an ICMP port unreachable from a server that is down) end nothing: the next datagram
    /// may find the server up again.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}
