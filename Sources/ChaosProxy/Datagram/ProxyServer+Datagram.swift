package import ChaosCore
import Logging
import NIOCore
import Synchronization

extension ProxyServer {
    /// The relay of a `udp://` proxy once it has started (nil for a TCP proxy).
    var datagramRelay: DatagramRelay? { state.withLock { $0.datagram } }

    /// The given UDP flows (all when nil) continue from a new upstream-facing port, as after a NAT rebinding: the
    /// server sees the flow's datagrams come from a new port (from the address a handoff's `new_address` gave the
    /// proxy, when it did), and its answers to the old one go nowhere. Returns how many flows it reached (none on a TCP
    /// proxy).
    package func rebindFlows(_ ids: [ConnectionID]?) async -> Int {
        guard let relay = datagramRelay else { return 0 }
        await leaveDatagramFastPath()
        return (try? await relay.loop.submit { relay.rebind(ids) }.get()) ?? 0
    }

    /// A UDP proxy's datagrams move off the fast path (``DatagramFastPath``) to ``DatagramRelay``, where faults act: called
    /// before any fault touches them, once (a later call waits for the first one's move). Its listening socket becomes
    /// the relay's, unless the proxy stopped or began refusing meanwhile.
    func leaveDatagramFastPath() async {
        guard let relay = datagramRelay, relay.fastPath.withLock({ $0 != nil }) else { return }
        let move = state.withLock { current -> Task<Void, Never> in
            if let begun = current.leavingFastPath { return begun }
            let task = Task {
                guard let channel = await relay.leaveFastPath() else { return }
                let kept = state.withLock { state -> Bool in
                    guard case .datagramFastPath = state.listener else { return false }
                    state.listener = .nio(channel)
                    return true
                }
                if !kept { try? await channel.close() }
            }
            current.leavingFastPath = task
            return task
        }
        await move.value
    }

    /// A UDP flow's socket toward the upstream could not be opened: counted and recorded as a TCP connection's
    /// unreachable upstream is.
    func upstreamFailed(datagramFlow id: ConnectionID, reason: String) {
        counters.upstreamFailed()
        sink?.record(TrafficEvent(time: clock.now(), connection: 0, kind: .refused(proxy: spec.name, reason: reason)))
        logger.debug("upstream unreachable", metadata: ["proxy.name": "\(spec.name)", "flow": "\(id)", "error": "\(reason)"])
    }
}
