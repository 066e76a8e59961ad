import CChaosEpoll
import ChaosCore
import Glibc
import Logging
import NIOCore

/// A proxied connection that no shaping touches, relayed by an ``EpollRelayLoop`` with plain
/// reads and writes: edge-triggered, one read buffer per thread, and at most one read's worth of
/// bytes held per direction (a slow reader stops reads from its partner, so TCP slows the writer).
/// What passes, when a FIN or a reset is passed on, what a cut does and what is recorded are the
/// ``RelayStateMachine``'s rules; this type performs its actions on raw sockets.
///
/// A `disconnect` cuts it in place; a fault that shapes its bytes moves it to NIO first
/// (``detach(_:)`` hands both sockets over).
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
    var machine = RelayStateMachine()
    /// Taken out of the loop: handed over to NIO, or finished.
    var isDone = false
    /// The proxy is stopping: its resets read nothing first (``readWhatTheResetDrops(_:)``).
    var terminating = false
    /// Asked to detach while the upstream connect was under way.
    private var detachWaiters: [(DetachedConnection?) -> Void] = []
    /// Cut by a fault while the upstream connect was under way: done once it answers.
    private var pendingCut: (mode: DisconnectMode, linger: ChaosDuration)?
    /// When each leg awaiting its acknowledgements (``RelayStateMachine/Action/awaitAcknowledgements(_:)``)
    /// stops waiting (loop clock).
    var acknowledgementDeadlines: [UInt64] = [0, 0]
    /// Registered with the loop for an acknowledgement poll.
    var watchingAcknowledgements = false
    /// Acknowledgement polls since the last write that found bytes still outstanding (they space the next poll out).
    var acknowledgementPollsWaiting = 0
    /// Bumped by every linger scheduled or cancelled: a timer from an earlier one does nothing.
    private var lingerGeneration = 0
    /// Bytes move socket to socket through a pipe (``SplicePipe``): nothing records them (no audit, no capture), and
    /// the system has not refused it for this connection.
    var splices: Bool

    struct Leg {
        var fd: Int32
        /// Edge-triggered: data, a FIN or an error may be waiting.
        var readable = false
        /// The peer half-closed (or hung up): read until a read returns 0.
        var peerClosing = false
        /// Bytes to write to this leg that the socket did not take yet.
        var pending: [UInt8] = []
        var pendingStart = 0
        /// The pipe bytes headed to this leg go through when they are spliced (taken at the first of them).
        var pipe: SplicePipe?
        /// A read from this leg filled the whole buffer: its bytes come in bulk and are spliced from now on (small
        /// exchanges are read and written: a splice takes one more system call per wake-up to find the socket empty).
        var bulk = false
        /// What the peer acknowledged of the bytes written to this leg.
        var acknowledgements: AcknowledgementTracker
        var hasPending: Bool { pendingStart < pending.count || (pipe?.held ?? 0) > 0 }

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
        splices = route.splice != .off
        if route.splice == .always {
            legs[0].bulk = true
            legs[1].bulk = true
        }
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
        // errno is read before anything else can overwrite it.
        let connectError = dialled == 0 ? 0 : errno
        if dialled != 0, connectError != EINPROGRESS { return failConnect(connectError) }
        do {
            key = try loop.register(self, descriptors: [legs[0].fd, server])
        } catch {
            return failConnect(error.code)
        }
        loop.connectDeadline(key: key, after: UInt64(max(0, route.connectTimeout.nanoseconds)))
    }

    /// The upstream did not answer in time.
    func connectTimedOut() {
        if machine.phase == .connecting { failConnect(ETIMEDOUT) }
    }

    /// The upstream socket became writable (`failed`: with an error or hang-up): the connect ended.
    private func finishConnect(failed: Bool) {
        let error = failed ? RawSocket.pendingError(legs[1].fd) : 0
        guard error == 0 else { return failConnect(error) }
        perform(machine.connected())
        route.counters.connectionOpened()
        if let sink = route.sink {
            let endpoints =
                route.trafficSink == nil
                ? ConnectionEndpoints(proxy: route.proxyName, client: "", listen: "", proxyLocal: "", server: "")
                : ConnectionEndpoints(
                    proxy: route.proxyName,
                    client: RawSocket.name(legs[0].fd, peer: true),
                    listen: RawSocket.name(legs[0].fd, peer: false),
                    proxyLocal: RawSocket.name(legs[1].fd, peer: false),
                    server: RawSocket.name(legs[1].fd, peer: true)
                )
            sink.record(TrafficEvent(time: route.clock.now(), connection: id, kind: .opened(endpoints)))
        }
        if let pendingCut {
            self.pendingCut = nil
            _ = cut(pendingCut.mode, linger: pendingCut.linger)
        }
        resume()
        guard !isDone, !machine.isCut, !detachWaiters.isEmpty else { return }
        let waiters = detachWaiters
        detachWaiters = []
        detach(waiters[0])
        for waiter in waiters.dropFirst() { waiter(nil) }
    }

    /// The upstream could not be reached: the client is reset, as the NIO relay does.
    private func failConnect(_ code: Int32) {
        connectError = code
        perform(machine.connectFailed())
    }

    /// Why the upstream could not be reached, for the refusal's event.
    private var connectError: Int32 = 0

    // MARK: events

    func handle(events: UInt32, slot: Int) {
        let hangUp = events & UInt32(CHAOS_EPOLL_HUP | CHAOS_EPOLL_RDHUP) != 0
        if hangUp { legs[slot].peerClosing = true }
        if hangUp || events & UInt32(CHAOS_EPOLL_IN | CHAOS_EPOLL_ERR) != 0 { legs[slot].readable = true }
        let writable = events & UInt32(CHAOS_EPOLL_OUT | CHAOS_EPOLL_ERR | CHAOS_EPOLL_HUP) != 0
        guard !isDone else { return }
        switch machine.phase {
        case .connecting:
            if slot == 1, writable { finishConnect(failed: events & UInt32(CHAOS_EPOLL_ERR | CHAOS_EPOLL_HUP) != 0) }
        case .relaying:
            // A leg is not read after its FIN, so a reset that follows the FIN shows only as the socket's error.
            if events & UInt32(CHAOS_EPOLL_ERR) != 0, machine.leg(Self.side(slot)).receivedFIN, legs[slot].fd >= 0 {
                let error = RawSocket.pendingError(legs[slot].fd)
                if error != 0 { return fail(slot, error) }
            }
            if machine.leg(Self.side(slot)).awaitsAcknowledgements {
                _ = checkAcknowledgementWait(slot)
            } else if legs[slot].acknowledgements.isOutstanding {
                _ = pollAcknowledgements(slot)
            }
            if !isDone, writable, legs[slot].hasPending { flush(to: slot) }
            if !isDone { pump(from: slot) }
        case .finished:
            break
        }
    }

    /// Carries on reading both legs (after connecting, or a turn given up to other connections).
    func resume() {
        pump(from: 0)
        pump(from: 1)
    }

    // MARK: ending

    /// A fault cuts the connection as `mode` says, here on its own thread; returns whether it was
    /// live to cut.
    func cut(_ mode: DisconnectMode, linger: ChaosDuration) -> Bool {
        guard !isDone else { return false }
        if machine.phase == .connecting {
            // It counts as live (the proxy accepted it); the cut lands as soon as it is.
            if pendingCut == nil { pendingCut = (mode, linger) }
            return true
        }
        let actions = machine.cut(mode, linger: linger)
        perform(actions)
        // A cut leg is read (and dropped) until its peer closes.
        if !isDone { resume() }
        return !actions.isEmpty
    }

    /// Resets whatever is still open (the proxy is stopping).
    func terminate() {
        guard !isDone else { return }
        terminating = true
        perform(machine.terminate())
    }

    /// Takes both sockets out of the loop and hands them, with the bytes still pending, to
    /// `reply` (nil when the connection is already over or cut). Waits for a connect under way.
    func detach(_ reply: @escaping (DetachedConnection?) -> Void) {
        guard !isDone, !machine.isCut, !machine.awaitsAcknowledgements else { return reply(nil) }
        switch machine.phase {
        case .connecting:
            detachWaiters.append(reply)
        case .finished:
            reply(nil)
        case .relaying:
            loop.unregister(key: key, descriptors: [legs[0].fd, legs[1].fd])
            isDone = true
            lingerGeneration += 1
            let recorded = Set(Side.allCases.filter { machine.leg($0).closeRecorded })
            // Spliced bytes still in a pipe are pending bytes like any other.
            let pending = (0..<2).map { slot in Array(legs[slot].pending[legs[slot].pendingStart...]) + (legs[slot].pipe?.take() ?? []) }
            closePipes()
            reply(
                DetachedConnection(
                    client: legs[0].fd,
                    server: legs[1].fd,
                    adoption: ProxiedConnection.Adoption(
                        toClient: pending[0],
                        toServer: pending[1],
                        closeRecorded: recorded,
                        acknowledgements: legs.map(\.acknowledgements)
                    )
                )
            )
        }
    }

    func finish() {
        closePipes()
        isDone = true
        lingerGeneration += 1
        if key != 0 { loop.forget(key: key) }
        route.finished(id)
        let waiters = detachWaiters
        detachWaiters = []
        for waiter in waiters { waiter(nil) }
    }

    /// Gives the splice pipes back to the loop (one that still holds bytes is closed: the connection is done with them).
    func closePipes() {
        for slot in 0..<2 {
            if let pipe = legs[slot].pipe { loop.giveBack(pipe) }
            legs[slot].pipe = nil
        }
    }

    /// Records `slot`'s close (the machine says when: once per leg).
    func recordClose(_ slot: Int, _ kind: TrafficEvent.CloseKind) {
        route.sink?.record(TrafficEvent(time: route.clock.now(), connection: id, kind: .closed(Self.side(slot), kind)))
    }

    /// Schedules the machine's linger on the loop (a later cut or the end cancels it).
    func scheduleLinger(_ delay: ChaosDuration) {
        lingerGeneration += 1
        let generation = lingerGeneration
        loop.schedule(after: UInt64(max(0, delay.nanoseconds))) { [self] in
            guard generation == lingerGeneration, !isDone else { return }
            perform(machine.lingerExpired())
        }
    }

    func cancelLinger() { lingerGeneration += 1 }

    /// The refusal of an upstream that could not be reached: counted, logged and recorded.
    func recordUpstreamFailure() {
        let reason = String(cString: strerror(connectError))
        route.counters.upstreamFailed()
        route.logger.debug("upstream unreachable", metadata: ["proxy.name": "\(route.proxyName)", "error": "\(reason)"])
        route.sink?.record(
            TrafficEvent(
                time: route.clock.now(),
                connection: 0,
                kind: .refused(
                    proxy: route.proxyName,
                    reason: "upstream \(route.upstream.hostPort): \(reason)"
                )
            )
        )
    }
}
