import ChaosCore
import NIOCore
import NIOPosix
import Synchronization

extension ProxyServer {
    /// `bootstrap` bound to the local address a handoff with `new_address` gave new upstream connections (as it is
    /// when there is none).
    func fromSourceAddress(_ bootstrap: ClientBootstrap) -> ClientBootstrap {
        guard let source = state.withLock({ $0.sourceAddress }) else { return bootstrap }
        return bootstrap.bind(to: source)
    }

    /// A handoff with `new_address` ended: new upstream connections come from the pool's next address (the first,
    /// after the first handoff; round the pool after its last). Returns the address, nil when it is not an IP address.
    @discardableResult
    package func changeSourceAddress(pool: [String]) -> String? {
        guard !pool.isEmpty else { return nil }
        return state.withLock { state -> String? in
            let address = pool[state.addressChanges % pool.count]
            state.addressChanges += 1
            guard let socketAddress = try? SocketAddress(ipAddress: address, port: 0) else { return nil }
            state.sourceAddress = socketAddress
            return address
        }
    }

    /// The local address new upstream connections come from (nil: the system's choice).
    package var sourceAddress: String? { state.withLock { $0.sourceAddress?.ipAddress } }
}
