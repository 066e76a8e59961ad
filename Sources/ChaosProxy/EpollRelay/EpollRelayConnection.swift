import ChaosCore
import CChaosEpoll
import Glibc
import Logging
import NIOCore

/// A proxied connection that no fault or shaping touches, relayed by a ``EpollRelayLoop``
/// with plain reads and writes: edge-triggered, one read buffer per thread, and at most one
/// read's worth of bytes held per direction (a slow reader stops reads from its partner, so
/// TCP slows the writer). A FIN becomes a half-close on the other leg once what came before it
/// is written; a reset or error on one leg resets the other.
///
/// When a fault reaches it, ``detach(_:)`` hands both sockets to NIO.
///
/// Sendable because every mutable property is touched only on its loop's thread: other threads
/// reach it through ``EpollRelayLoop/execute(_:)``.
final class EpollRelayConnection: EpollRelaySelectable, @unchecked Sendable {
    let id: ConnectionID
    let loop: EpollRelayLoop
    let route: EpollRelayRoute
    /// Index 0 is the client leg, 1 the server leg (also the epoll slots).
    var legs: [Leg]
    private var key: UInt64 = 0
    var phase = Phase.connecting
    /// Asked to detach while the upstream connect was under way.
    private var detachWaiters: [(DetachedConnection?) -> Void] = []

    /// `closing`: both FINs passed on, waiting (at most ``AcknowledgementTracker/closeWait``) for
    /// the peers to acknowledge the last bytes before the sockets are closed.
    enum Phase { case connecting, relaying, closing, done }
    /// When a `closing` connection closes whatever the peers acknowledged (loop clock).
    var closeDeadline: UInt64 = 0
    /// Registered with the loop for an acknowledgement poll.
    var watchingAcknowledgements = false

    struct Leg {
        var fd: Int32
        /// Edge-triggered: data, a FIN or an error may be waiting.
        var readable = false
        /// The peer half-closed (or hung up): read until a read returns 0.
        var peerClosing = false
        /// A read returned 0.
        var eof = false
        /// Our FIN went out on this leg.
        var finSent = false
        /// Bytes to write to this leg that the socket did not take yet.
        var pending: [UInt8] = []
        var pendingStart = 0
        var closeRecorded = false
        /// What the peer acknowledged of the bytes written to this leg.
        var acknowledgements: AcknowledgementTracker
        var hasPending: Bool { pendingStart < pending.count }

        init(fd: Int32, dialled: Bool) {
            self.fd = fd
            acknowledgements = AcknowledgementTracker(dialled: dialled)
        }
    }

    /// A connection for the accepted `client` socket; ``start()`` dials the upstream.
    init(id: ConnectionID, client: Int32, loop: EpollRelayLoop, route: EpollRelayRoute) {
        self.id = id
        self.loop = loop
        self.route = route
        legs = [Leg(fd: client, dialled: false), Leg(fd: -1, dialled: true)]
    }

    static func side(_ slot: Int) -> Side { slot == 0 ? .client : .server }

    // MARK: connecting

    /// Dials the upstream without blocking and starts watching both sockets.
    func start() {
        let server = chaos_tcp_socket(Int32(route.upstream.protocol.rawValue))
        guard server >= 0 else { return failConnect(-server) }
        guard server < RawSocket.descriptorCeiling else {
            close(server)
            return failConnect(EMFILE)
        }
        legs[1].fd = server
        // The client socket inherited TCP_NODELAY from the listener.
        RawSocket.setNoDelay(server)
        let dialled = route.upstream.withSockAddr { connect(server, $0, socklen_t($1)) }
        if dialled != 0, errno != EINPROGRESS { return failConnect(errno) }
        guard let key = loop.register(self, descriptors: [legs[0].fd, server]) else { return failConnect(errno) }
        self.key = key
        loop.connectDeadline(key: key, after: route.connectTimeoutNanoseconds)
    }

    /// The upstream did not answer in time.
    func connectTimedOut() {
        if phase == .connecting { failConnect(ETIMEDOUT) }
    }

    /// The upstream socket became writable (`failed`: with an error or hang-up): the connect ended.
    private func finishConnect(failed: Bool) {
        let error = failed ? RawSocket.pendingError(legs[1].fd) : 0
        guard error == 0 else { return failConnect(error) }
        phase = .relaying
        route.counters.connectionOpened()
        if let sink = route.sink {
            let endpoints = route.trafficSink == nil
                ? ConnectionEndpoints(proxy: route.proxyName, client: "", listen: "", proxyLocal: "", server: "")
                : ConnectionEndpoints(proxy: route.proxyName, client: RawSocket.name(legs[0].fd, peer: true),
                                      listen: RawSocket.name(legs[0].fd, peer: false),
                                      proxyLocal: RawSocket.name(legs[1].fd, peer: false),
                                      server: RawSocket.name(legs[1].fd, peer: true))
            sink.record(TrafficEvent(time: route.clock.now(), connection: id, kind: .opened(endpoints)))
        }
        resume()
        guard phase == .relaying, !detachWaiters.isEmpty else { return }
        let waiters = detachWaiters
        detachWaiters = []
        detach(waiters[0])
        for waiter in waiters.dropFirst() { waiter(nil) }
    }

    /// The upstream could not be reached: the client is reset, as the NIO relay does.
    private func failConnect(_ code: Int32) {
        route.counters.upstreamFailed()
        route.logger.debug("upstream unreachable", metadata: ["proxy.name": "\(route.proxyName)", "error": "\(String(cString: strerror(code)))"])
        route.sink?.record(TrafficEvent(time: route.clock.now(), connection: 0, kind: .refused(
            proxy: route.proxyName, reason: "upstream \(route.upstream.hostPort): \(String(cString: strerror(code)))")))
        if legs[1].fd >= 0 { close(legs[1].fd) }
        finish() // before the client can see the reset
        RawSocket.closeWithReset(legs[0].fd)
    }

    // MARK: events

    func handle(events: UInt32, slot: Int) {
        let hangUp = events & UInt32(CHAOS_EPOLL_HUP | CHAOS_EPOLL_RDHUP) != 0
        if hangUp { legs[slot].peerClosing = true }
        if hangUp || events & UInt32(CHAOS_EPOLL_IN | CHAOS_EPOLL_ERR) != 0 { legs[slot].readable = true }
        let writable = events & UInt32(CHAOS_EPOLL_OUT | CHAOS_EPOLL_ERR | CHAOS_EPOLL_HUP) != 0
        switch phase {
        case .connecting:
            if slot == 1, writable { finishConnect(failed: events & UInt32(CHAOS_EPOLL_ERR | CHAOS_EPOLL_HUP) != 0) }
        case .relaying:
            if legs[slot].acknowledgements.isOutstanding { _ = pollAcknowledgements(slot) }
            if writable, legs[slot].hasPending { flush(to: slot) }
            if phase == .relaying { pump(from: slot) }
        case .closing:
            _ = checkClosing()
        case .done:
            break
        }
    }

    /// Carries on reading both legs (after connecting, or a turn given up to other connections).
    func resume() {
        pump(from: 0)
        pump(from: 1)
    }

    // MARK: ending

    /// Resets whatever is still open (the proxy is stopping).
    func terminate() {
        switch phase {
        case .connecting:
            if legs[1].fd >= 0 { close(legs[1].fd) }
            RawSocket.closeWithReset(legs[0].fd)
        case .relaying, .closing:
            for slot in 0..<2 {
                _ = pollAcknowledgements(slot, beforeReset: true)
                recordClose(slot, .reset)
                RawSocket.closeWithReset(legs[slot].fd)
            }
        case .done:
            return
        }
        finish()
    }

    /// Takes both sockets out of the loop and hands them, with the bytes still pending, to
    /// `reply` (nil when the connection is already over). Waits for a connect under way.
    func detach(_ reply: @escaping (DetachedConnection?) -> Void) {
        switch phase {
        case .connecting:
            detachWaiters.append(reply)
        case .done, .closing:
            reply(nil)
        case .relaying:
            loop.unregister(key: key, descriptors: [legs[0].fd, legs[1].fd])
            phase = .done
            let recorded = Set((0..<2).filter { legs[$0].closeRecorded }.map(Self.side))
            reply(DetachedConnection(client: legs[0].fd, server: legs[1].fd, adoption: ProxiedConnection.Adoption(
                toClient: Array(legs[0].pending[legs[0].pendingStart...]),
                toServer: Array(legs[1].pending[legs[1].pendingStart...]),
                closeRecorded: recorded, acknowledgements: legs.map(\.acknowledgements))))
        }
    }

    func finish() {
        phase = .done
        if key != 0 { loop.forget(key: key) }
        route.finished(id)
        let waiters = detachWaiters
        detachWaiters = []
        for waiter in waiters { waiter(nil) }
    }

    func recordClose(_ slot: Int, _ kind: TrafficEvent.CloseKind) {
        guard !legs[slot].closeRecorded else { return }
        legs[slot].closeRecorded = true
        route.sink?.record(TrafficEvent(time: route.clock.now(), connection: id, kind: .closed(Self.side(slot), kind)))
    }
}
