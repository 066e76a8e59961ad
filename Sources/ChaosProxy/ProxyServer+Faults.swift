package import ChaosCore
import ChaosProtocols
import Logging
import NIOCore
import NIOPosix
import Synchronization

extension ProxyServer {
    /// Picks the connections an occurrence hits among the live ones, from its seed.
    package func pickTargets(_ targets: Targets, seed: UInt64) -> [ConnectionID] {
        var generator = SeededGenerator(seed: seed).fork(spec.name)
        return targets.pick(from: liveConnections, using: &generator)
    }

    /// Shapes the given connections, or every connection, now and new, when `ids` is nil (only those `draw`
    /// reaches, when given), with `effect` (named `key`). Returns how many live connections it reached.
    @discardableResult
    package func addShaping(_ effect: FaultEffect, key: ShapingKey, to ids: [ConnectionID]?, draw: ConnectionDraw?) async -> Int {
        let shaped = ShapingOnAll(effect: effect, draw: draw)
        if let relay = datagramRelay {
            await leaveDatagramFastPath()
            if ids == nil { state.withLock { $0.shaping[key] = shaped } }
            return (try? await relay.loop.submit { relay.addShaping(effect, key: key, to: ids, draw: draw) }.get()) ?? 0
        }
        let connections = await targetConnections(ids) { state in
            if ids == nil { state.shaping[key] = shaped }
        }.nio.filter { ids != nil || shaped.reaches($0.id) }
        // Applied (not just queued) when this returns.
        for connection in connections {
            try? await connection.eventLoop.submit { connection.addShaping(effect, key: key) }.get()
        }
        // A dead path is dead when this returns: its segments are dropped; a lossy one's are drawn.
        if !connections.isEmpty, effect.makesDeadPath || KernelDeadPath.isInUse { await KernelDeadPath.shared.installed() }
        return connections.count
    }

    /// Lifts the shaping named `key` everywhere.
    package func removeShaping(key: ShapingKey) async {
        // Only NIO connections are shaped: those on the epoll relay stay where they are. A cut connection still
        // lingering may hold a fault's timer.
        let connections = state.withLock { state in
            state.shaping.removeValue(forKey: key)
            return Array(state.connections.values) + Array(state.lingering.values)
        }
        if let relay = datagramRelay { try? await relay.loop.submit { relay.removeShaping(key: key) }.get() }
        // A dead path in the kernel comes back before the bytes the fault held go out: released into rules not yet
        // gone, their first flight would be dropped and wait a retransmission timeout more.
        if KernelDeadPath.isInUse {
            var revived = false
            for connection in connections {
                if (try? await connection.eventLoop.submit { connection.reviveDeadPath(endingFault: key) }.get()) == true { revived = true }
            }
            if revived { await KernelDeadPath.shared.installed() }
        }
        for connection in connections {
            try? await connection.eventLoop.submit { connection.removeShaping(key: key) }.get()
        }
        if !connections.isEmpty, KernelDeadPath.isInUse { await KernelDeadPath.shared.installed() }
    }

    /// Sends the given connections (all when nil) a protocol fault's frames (`ws-close`, `goaway`) at their next frame
    /// boundary and closes them after its grace time. Only connections whose frames this proxy follows
    /// (``Options/frames``) can be reached; returns how many were.
    /// A fault whose effect outlives its strike (``ProtocolPlugin/lingering(_:struck:)``) then lies in wait on every
    /// connection, live and new, to the run's end.
    /// The lingering fault lies in wait before the strike: a client that answers its strike at once (a new request
    /// naming its session, on a new connection) must find it there.
    package func protocolClose(_ ids: [ConnectionID]?, _ fault: ProtocolFault) async -> Int {
        let connections = state.withLock { state in
            (ids ?? Array(state.connections.keys)).compactMap { state.connections[$0] }
        }
        var targets: [ProxiedConnection] = []
        var clients: [any FrameBoundaryTracking] = []
        var plugin: (any ProtocolPlugin.Type)?
        for connection in connections {
            let hit = try? await connection.eventLoop.submit { connection.strikable(by: fault) }.get()
            guard let (followed, client) = hit ?? nil else { continue }
            plugin = followed
            targets.append(connection)
            clients.append(client)
        }
        if let lingering = plugin?.lingering(fault, struck: clients) {
            let key = state.withLock { state in
                state.lingeringFaults += 1
                return ShapingKey(timeline: ShapingKey.lingeringTimeline, occurrence: state.lingeringFaults)
            }
            _ = await beginWaitingFault(lingering, key: key)
        }
        var struck = 0
        for connection in targets where (try? await connection.eventLoop.submit { connection.protocolClose(fault) }.get()) == true {
            struck += 1
        }
        return struck
    }

    /// A protocol fault that lasts (``ProtocolFaultDeclaration/lasting``): until ``endWaitingFault(key:)`` it lies in
    /// wait on every connection whose frames this proxy follows, live and new, and each its plug-in catches gets the
    /// fault's frames and is closed after its grace time. Returns how many live connections it lies in wait on.
    package func beginWaitingFault(_ fault: ProtocolFault, key: ShapingKey) async -> Int {
        let connections = state.withLock { state in
            state.waiting[key] = fault
            state.caught[key] = 0
            return Array(state.connections.values)
        }
        var waiting = 0
        for connection in connections where (try? await connection.eventLoop.submit { connection.wait(fault, key: key) }.get()) == true {
            waiting += 1
        }
        return waiting
    }

    /// Ends a lasting protocol fault: no connection is caught any more. Returns how many it caught.
    package func endWaitingFault(key: ShapingKey) async -> Int {
        let (connections, caught) = state.withLock { state in
            state.waiting.removeValue(forKey: key)
            return (Array(state.connections.values), state.caught.removeValue(forKey: key) ?? 0)
        }
        for connection in connections {
            try? await connection.eventLoop.submit { connection.stopWaiting(key: key) }.get()
        }
        return caught
    }

    /// Cuts the given connections (all when nil) as `mode` says. Returns how many it cut.
    @discardableResult
    package func disconnect(_ ids: [ConnectionID]?, mode: DisconnectMode, linger: ChaosDuration) async -> Int {
        // A cut needs no shaping: connections on the epoll relay are cut where they are.
        let (connections, relayed) = await targetConnections(ids, inPlace: true) { _ in }
        // A cut's resets reach the ends at once, through a dead path too: its drops are lifted first.
        var lifted = false
        for connection in connections where (try? await connection.eventLoop.submit { connection.liftDeadPathForCut() }.get()) == true {
            lifted = true
        }
        if lifted { await KernelDeadPath.shared.installed() }
        var cut = 0
        for connection in relayed where await connection.loop.submit({ connection.cut(mode, linger: linger) }) == true {
            cut += 1
        }
        for connection in connections {
            let hit = try? await connection.eventLoop.submit { connection.cut(mode, linger: linger) }.get()
            if hit == true { cut += 1 }
        }
        return cut
    }

    /// Whether it refuses connections now (disabled, or a refuse fault).
    package var isRefusing: Bool { state.withLock { $0.refusing > 0 } }

    /// Stops accepting and ends live connections with a FIN (Toxiproxy's `enabled: false`).
    package func disable() async {
        await beginRefusing()
        await disconnect(nil, mode: .close, linger: .seconds(Int64(5)))
    }

    /// The link profile new connections start with from now on.
    package func setBaseline(_ profile: LinkProfile?) {
        state.withLock { $0.baseline = profile }
        // A UDP proxy's new flows take it once they are off the fast path (a handoff, which sets it, moved them already).
        if datagramRelay?.fastPath.withLock({ $0 != nil }) == true { Task { await leaveDatagramFastPath() } }
    }

    /// Stops accepting: the listening socket is closed so that clients get ECONNREFUSED.
    /// Nested calls are counted; the last ``endRefusing()`` listens again.
    package func beginRefusing() async {
        await leaveDatagramFastPath()
        let listener = state.withLock { state -> Listener? in
            state.refusing += 1
            guard state.refusing == 1 else { return nil }
            defer { state.listener = nil }
            return state.listener
        }
        await listener?.close()
    }

    /// Listens again on the same address once every refusal has ended.
    package func endRefusing() async {
        let address = state.withLock { state -> SocketAddress? in
            state.refusing = max(0, state.refusing - 1)
            return state.refusing == 0 && !state.stopped && state.listener == nil ? state.boundAddress : nil
        }
        guard let address else { return }
        for attempt in 0..<50 {
            do {
                let listener = try await rebind(address)
                let keep = state.withLock { state -> Bool in
                    guard !state.stopped, state.refusing == 0 else { return false }
                    state.listener = listener
                    return true
                }
                if !keep { await listener.close() }
                return
            } catch {
                logger.warning("cannot listen again yet", metadata: ["proxy.name": "\(spec.name)", "attempt": "\(attempt)"])
                try? await Task.sleep(nanoseconds: 100_000_000)
            }
        }
        logger.error("gave up listening again after a refuse fault", metadata: ["proxy.name": "\(spec.name)"])
    }
}

/// A shaping fault on every connection, now and new, or on each that its draw reaches (a toxic's toxicity).
struct ShapingOnAll: Sendable {
    var effect: FaultEffect
    var draw: ConnectionDraw?

    func reaches(_ id: ConnectionID) -> Bool { draw?.reaches(id) ?? true }
}
