public import ChaosCore
import NIOCore
import Synchronization

/// A toxic as a proxy holds it: what it does, and which connections it reaches.
public struct ConnectionToxic: Sendable, Equatable {
    /// What a connection it reaches gets.
    public var effect: ToxicEffect
    /// The probability that it reaches a connection (Toxiproxy's `toxicity`).
    public var toxicity: Double
    /// The seed of the per-connection draws.
    public var seed: UInt64

    /// A toxic with `effect` reaching each connection with probability `toxicity`, drawn from `seed`.
    public init(effect: ToxicEffect, toxicity: Double, seed: UInt64) {
        self.effect = effect
        self.toxicity = toxicity
        self.seed = seed
    }

    /// Whether it reaches connection `id`: one draw per (toxic, connection), so the same seed reaches the
    /// same connections whatever the order they arrive or the toxic is added in.
    public func reaches(_ id: ConnectionID) -> Bool {
        guard toxicity < 1 else { return true }
        var generator = SeededGenerator(seed: seed).fork("connection", id)
        return generator.nextUnit() < toxicity
    }
}

extension ProxyServer {
    /// Adds a toxic named `key` to every connection it reaches, now and new. Returns how many live
    /// connections it reached.
    @discardableResult
    public func addToxic(_ toxic: ConnectionToxic, key: ShapingKey) async -> Int {
        // Toxics act in the NIO relay: live connections on the epoll relay move there first.
        let connections = await targetConnections(nil) { $0.toxics[key] = toxic }.nio
        // Submitted to every connection's event loop at once, then awaited: applied (not just queued) on return.
        let applied = connections.filter { toxic.reaches($0.id) }.map { connection in
            connection.eventLoop.submit { connection.addToxic(toxic.effect, key: key) }
        }
        for future in applied { try? await future.get() }
        return applied.count
    }

    /// Removes the toxic named `key` from every connection.
    public func removeToxic(key: ShapingKey) async {
        let connections = state.withLock { state in
            state.toxics.removeValue(forKey: key)
            return Array(state.connections.values) + Array(state.lingering.values)
        }
        let removed = connections.map { connection in connection.eventLoop.submit { connection.removeToxic(key: key) } }
        for future in removed { try? await future.get() }
    }

    /// Whether it refuses connections now (disabled, or a refuse fault).
    public var isRefusing: Bool { state.withLock { $0.refusing > 0 } }

    /// Stops accepting and ends live connections with a FIN (Toxiproxy's `enabled: false`).
    public func disable() async {
        await beginRefusing()
        await disconnect(nil, mode: .close, linger: .seconds(Int64(5)))
    }
}
