import CChaosEpoll
import ChaosCore
import Glibc
import NIOCore
import Synchronization

/// A UDP proxy's datagrams while nothing shapes, records or moves them (`chaos proxy` before its first fault): relayed on
/// an epoll relay thread with plain sockets, a batch of datagrams per system call each way (`recvmmsg`, `sendmmsg`), as
/// the TCP relay's epoll threads move connections nothing shapes. The rules are ``DatagramRelay``'s: a flow per client
/// address with a socket of its own toward the upstream (its port is the mapping), answers taken from the upstream's
/// address only, at most ``ProxyServer/Options/maxFlows`` flows, a flow with no datagram either way for the idle timeout
/// ended, and a datagram the kernel's send buffer refuses dropped and counted. The first fault moves the listening
/// socket and every flow's socket, each with its port, to ``DatagramRelay`` (``detach()``), where faults act.
/// Every method but ``start(on:)`` and ``detach()``'s hop runs on ``loop``.
final class DatagramFastPath: EpollRelaySelectable, @unchecked Sendable {
    /// The datagrams one read takes.
    static let batch = 32
    /// Batches read per readiness report of one socket, so that no socket starves the others (the sockets are
    /// registered level-triggered: what is left is reported again).
    static let batchesPerTurn = 4
    /// A slot has room for UDP's largest datagram.
    static let slot = DatagramRelay.largestDatagram

    /// One client address's flow: its socket toward the upstream.
    final class Flow: EpollRelaySelectable {
        let id: ConnectionID
        let client: chaos_address
        let fd: Int32
        var key: UInt64 = 0
        var lastActivity: Int64
        unowned let path: DatagramFastPath

        init(id: ConnectionID, client: chaos_address, fd: Int32, now: Int64, path: DatagramFastPath) {
            self.id = id
            self.client = client
            self.fd = fd
            lastActivity = now
            self.path = path
        }

        func handle(events: UInt32, slot: Int) { path.fromServer(self) }
    }

    /// What ``detach()`` hands ``DatagramRelay``: the listening socket and each flow's socket, open and bound.
    struct Detached: Sendable {
        let listener: Int32
        let flows: [(id: ConnectionID, client: SocketAddress, fd: Int32, lastActivity: Int64)]
    }

    let loop: EpollRelayLoop
    private let listener: Int32
    private let upstream: chaos_address
    /// The address new flows' sockets bind to (the upstream's family, any port).
    private let flowSource: chaos_address
    private let name: String
    private let ids: ConnectionIDSource
    private let clock: RunClock
    private let counters: ProxyCounters
    private let sink: (any TrafficEventSink)?
    /// The relay it hands over to, which keeps the live flows' ids (``DatagramRelay/liveIDs``).
    private unowned let relay: DatagramRelay
    private let maxFlows: Int
    private let idleTimeout: Int64
    /// Whether runs of equal-sized datagrams go as segmented messages (``DatagramBatch/segmentsWanted(recording:environment:)``).
    private let segments = DatagramBatch.segmentsWanted(recording: false)
    private var key: UInt64 = 0
    private var flows: [AddressKey: Flow] = [:]
    private var isOver = false
    /// Where a batch lands: ``batch`` slots of ``slot`` bytes, their lengths and senders.
    private let buffer: UnsafeMutablePointer<UInt8>
    private let lengths: UnsafeMutablePointer<UInt32>
    private let senders: UnsafeMutablePointer<chaos_address>

    /// The address the proxy listens on.
    let address: SocketAddress?

    /// Binds the listening socket at `listen` for datagrams to `upstream`; throws when the system refuses the socket.
    init(
        listen: SocketAddress,
        upstream: SocketAddress,
        loop: EpollRelayLoop,
        server: ProxyServer,
        relay: DatagramRelay
    ) throws(RawSocketError) {
        let fd = chaos_udp_socket([chaos_address(listen)])
        guard fd >= 0 else { throw RawSocketError(call: "bind", code: -fd) }
        var size = DatagramRelay.listenerReceiveBuffer
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var bound = chaos_address()
        _ = chaos_local_address(fd, &bound)
        listener = fd
        address = bound.socketAddress
        self.upstream = chaos_address(upstream)
        flowSource = chaos_address(
            try! SocketAddress(ipAddress: upstream.protocol == .inet6 ? "::" : "0.0.0.0", port: 0)  // a literal: never throws
        )
        self.loop = loop
        name = server.spec.name
        ids = server.ids
        clock = server.clock
        counters = server.counters
        sink = server.sink
        self.relay = relay
        maxFlows = server.options.maxFlows
        idleTimeout = server.options.udpIdleTimeout
        buffer = .allocate(capacity: Self.batch * Self.slot)
        lengths = .allocate(capacity: Self.batch)
        senders = .allocate(capacity: Self.batch)
        senders.initialize(repeating: chaos_address(), count: Self.batch)
    }

    deinit {
        buffer.deallocate()
        lengths.deallocate()
        senders.deallocate()
    }

    /// Starts relaying on the loop's thread; throws when epoll refuses the listening socket (which is then closed).
    func start() async throws {
        let started = await loop.submit { [self] () -> RawSocketError? in
            do throws(RawSocketError) {
                key = try loop.register(self, descriptors: [listener], exclusive: true)
            } catch {
                return error
            }
            scheduleSweep()
            return nil
        }
        guard let started else {
            close(listener)
            throw RawSocketError(call: "epoll_ctl", code: ESHUTDOWN)
        }
        if let started {
            close(listener)
            throw started
        }
    }

    // MARK: datagrams

    func handle(events: UInt32, slot: Int) { fromClients() }

    /// Each batch from the clients goes on toward the upstream, run by run of one flow's datagrams.
    private func fromClients() {
        for _ in 0..<Self.batchesPerTurn {
            let count = Int(chaos_udp_read(listener, buffer, Int32(Self.slot), Int32(Self.batch), lengths, senders))
            guard count > 0, !isOver else { return }
            let now = clock.now()
            var first = 0
            while first < count {
                let sender = AddressKey(senders[first])
                var end = first + 1
                while end < count, AddressKey(senders[end]) == sender { end += 1 }
                if let flow = flows[sender] ?? openFlow(from: senders[first], key: sender, at: now) {
                    flow.lastActivity = now
                    relay(first..<end, from: .client, to: flow.fd, address: upstream)
                } else {
                    // Past the cap on flows (or the system's own), a new address's datagrams go nowhere: each counted
                    // as a drop, none as a read.
                    for _ in first..<end { counters.dropped(.flowLimit) }
                }
                first = end
            }
            if count < Self.batch { return }
        }
    }

    /// A batch from the upstream to `flow`'s socket goes back to its client; what came from another address is dropped
    /// (a NAT that filters by endpoint).
    fileprivate func fromServer(_ flow: Flow) {
        for _ in 0..<Self.batchesPerTurn {
            let count = Int(chaos_udp_read(flow.fd, buffer, Int32(Self.slot), Int32(Self.batch), lengths, senders))
            guard count > 0, !isOver else { return }
            flow.lastActivity = clock.now()
            let server = AddressKey(upstream)
            var first = 0
            while first < count {
                var end = first
                while end < count, AddressKey(senders[end]) == server { end += 1 }
                if end > first { relay(first..<end, from: .server, to: listener, address: flow.client) }
                first = end + 1  // past the one from elsewhere
            }
            if count < Self.batch { return }
        }
    }

    /// Sends the datagrams `range` of the batch read from `side` to `address` through `fd`; what the kernel's send
    /// buffer does not take is dropped and counted.
    private func relay(_ range: Range<Int>, from side: Side, to fd: Int32, address: chaos_address) {
        counted(range, producedBy: side)
        var sent = range.lowerBound
        var to = address
        while sent < range.upperBound {
            let went = Int(
                chaos_udp_send(fd, buffer, Int32(Self.slot), lengths, Int32(sent), Int32(range.upperBound - sent), &to, segments ? 1 : 0)
            )
            guard went > 0 else { break }
            sent += went
        }
        for _ in sent..<range.upperBound { counters.dropped(.sendBuffer) }
    }

    /// Counts the datagrams `range` as read from `side`.
    private func counted(_ range: Range<Int>, producedBy side: Side) {
        var bytes = 0
        for index in range { bytes += Int(lengths[index]) }
        counters.datagramRead(range.count)
        counters.add(bytes: bytes, producedBy: side == .client)
    }

    // MARK: flows

    /// A new flow for `client`, with its own socket toward the upstream; nil past the cap on flows, or when the system
    /// refuses a socket.
    private func openFlow(from client: chaos_address, key: AddressKey, at now: Int64) -> Flow? {
        guard flows.count < maxFlows else { return nil }
        var source = flowSource
        let fd = chaos_udp_socket(&source)
        guard fd >= 0 else { return nil }
        let flow = Flow(id: ids.next(), client: client, fd: fd, now: now, path: self)
        do {
            flow.key = try loop.register(flow, descriptors: [fd], exclusive: true)
        } catch {
            close(fd)
            return nil
        }
        flows[key] = flow
        relay.liveIDs.withLock { _ = $0.insert(flow.id) }
        counters.connectionOpened()
        sink?.record(
            TrafficEvent(
                time: now,
                connection: flow.id,
                kind: .opened(ConnectionEndpoints(proxy: name, client: "", listen: "", proxyLocal: "", server: ""))
            )
        )
        return flow
    }

    /// Ends `flow`: its socket closes (the server's later answers to its port find nothing), both sides closed in order.
    private func end(_ flow: Flow, key: AddressKey) {
        flows[key] = nil
        loop.unregister(key: flow.key, descriptors: [flow.fd])
        close(flow.fd)
        // Its ends are recorded before it stops being live: a flow no longer listed has its closes in the events.
        sink?.recordFlowEnded(flow.id, at: clock.now(), how: .fin)
        relay.liveIDs.withLock { _ = $0.remove(flow.id) }
    }

    /// Ends the flows idle for the idle timeout, now and then (as ``DatagramRelay`` sweeps).
    private func scheduleSweep() {
        let every = UInt64(max(100_000_000, min(1_000_000_000, idleTimeout / 4)))
        loop.schedule(after: every) { [self] in
            guard !isOver else { return }
            let now = clock.now()
            for (key, flow) in flows where now - flow.lastActivity >= idleTimeout { end(flow, key: key) }
            scheduleSweep()
        }
    }

    // MARK: leaving

    /// Stops relaying and hands the sockets over, open, for ``DatagramRelay`` to take on; nil when it already stopped.
    func detach() async -> Detached? {
        await loop.submit { [self] () -> Detached? in
            guard !isOver else { return nil }
            isOver = true
            loop.unregister(key: key, descriptors: [listener])
            var handed: [(id: ConnectionID, client: SocketAddress, fd: Int32, lastActivity: Int64)] = []
            for flow in flows.values {
                loop.unregister(key: flow.key, descriptors: [flow.fd])
                guard let client = flow.client.socketAddress else {
                    close(flow.fd)
                    continue
                }
                handed.append((flow.id, client, flow.fd, flow.lastActivity))
            }
            flows = [:]
            return Detached(listener: listener, flows: handed)
        } ?? nil
    }

    /// Ends every flow and closes the listening socket (the proxy stops).
    func stop() async {
        _ = await loop.submit { [self] in
            guard !isOver else { return }
            for (key, flow) in flows { end(flow, key: key) }
            isOver = true
            loop.unregister(key: key, descriptors: [listener])
            close(listener)
        }
    }
}

/// A socket address as a dictionary key: the kernel's bytes, compared whole (``chaos_udp_read`` zeroes what lies past
/// an address's own length).
struct AddressKey: Hashable {
    let words: (UInt64, UInt64, UInt64, UInt32)

    init(_ address: chaos_address) {
        words = withUnsafeBytes(of: address.bytes) { bytes in
            (
                bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 24, as: UInt32.self)
            )
        }
    }

    static func == (lhs: AddressKey, rhs: AddressKey) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}

extension chaos_address {
    /// The kernel's form of `address`.
    init(_ address: SocketAddress) {
        self.init()
        var copy = self
        address.withSockAddr { pointer, size in
            withUnsafeMutableBytes(of: &copy.bytes) { $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: min(size, 28))) }
            copy.length = UInt32(min(size, 28))
        }
        self = copy
    }

    /// The address as NIO knows it (nil for a family that is neither IPv4 nor IPv6).
    var socketAddress: SocketAddress? {
        withUnsafeBytes(of: bytes) { raw -> SocketAddress? in
            switch Int32(raw.load(as: sa_family_t.self)) {
            case AF_INET: SocketAddress(raw.loadUnaligned(as: sockaddr_in.self), host: "")
            case AF_INET6: SocketAddress(raw.loadUnaligned(as: sockaddr_in6.self), host: "")
            default: nil
            }
        }
    }
}
