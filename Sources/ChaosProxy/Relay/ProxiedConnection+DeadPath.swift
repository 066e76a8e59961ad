import ChaosCore
import NIOCore

/// A dead path on a connection (partition, stall, a handoff's blackout, offline, a NAT that forgot it): the
/// ``KernelDeadPath`` drops its legs' segments while it lasts, where the kernel path is available.
extension ProxiedConnection {
    /// The path is dead in `directions` now (none: alive). Both ways dead drops every segment of both legs; one way
    /// drops that way's segments but pure acknowledgements, so the other way's bytes still flow and are acknowledged.
    func setDeadPath(_ directions: Set<Direction>) {
        guard directions != deadDirections else { return }
        if deadDirections.isEmpty {
            beginDeadPathEpisode()
        } else if directions.isEmpty {
            endDeadPathEpisode()
        }
        deadDirections = directions
        guard let flows = legFlows(), flows.client != nil || flows.server != nil else { return }
        guard kernelDeadPath != nil else { return }
        // What the proxy sends a dead way's consumer is dropped: its unacknowledged bytes are not on their way.
        for direction in Direction.allCases { acknowledgements[direction.consumer.slot].deadPath(directions.contains(direction)) }
        wantKernelDrops(flows)
    }

    /// Asks the kernel for what this connection's flows should have dropped or queued now: its dead directions and its
    /// lossy ones together (a flow is in one set at a time).
    private func wantKernelDrops(_ flows: (client: KernelFlow?, server: KernelFlow?)) {
        kernelDeadPath?.want(
            KernelDrop.drops(dead: deadDirections, lossy: Set(kernelLossModels.keys), client: flows.client, server: flows.server)
        )
    }

    /// Whether this connection's loss goes to the kernel's loss queue: the kernel path is on, with its queue, and the
    /// client's leg has IP addresses.
    var takesKernelLoss: Bool {
        guard kernelDeadPath?.loss != nil else { return false }
        return legFlows(needed: true)?.client != nil
    }

    /// The kernel's loss queue draws the segments of `models`' directions on the client's leg (none: it draws none of
    /// this connection's): the chains are set before the segments are queued, and forgotten after.
    func setKernelLoss(_ models: [Direction: LossModel]) {
        guard models != kernelLossModels else { return }
        let before = kernelLossModels
        kernelLossModels = models
        guard let loss = kernelDeadPath?.loss, let client = legFlows(needed: true)?.client else { return }
        let flows: [Direction: KernelFlow] = [.upstream: client, .downstream: client.reversed]
        for (direction, model) in models {
            loss.set(flows[direction]!, model: model, seed: legs[direction.consumer]!.shaper.kernelLossSeed)
        }
        wantKernelDrops((client, kernelFlows?.server))
        for direction in before.keys where models[direction] == nil { loss.set(flows[direction]!, model: nil, seed: 0) }
    }

    /// A fault is about to cut the connection: what it sends the ends (a reset, a FIN) must reach them, so the kernel
    /// stops dropping its segments, for good. Returns whether it was dropping any (the caller waits for the rules to go).
    func liftDeadPathForCut() -> Bool {
        eventLoop.preconditionInEventLoop()
        deadPathLifted = true
        guard !deadDirections.isEmpty else { return false }
        setDeadPath([])
        return kernelFlows != nil
    }

    /// The flows of the bytes going up: client to proxy on the client leg, proxy to server on the server leg (looked up
    /// once, when a dead path first needs them; nil before; a leg without IP addresses has none).
    private func legFlows(needed: Bool = false) -> (client: KernelFlow?, server: KernelFlow?)? {
        if let kernelFlows { return kernelFlows }
        guard needed || !deadDirections.isEmpty else { return nil }
        let client = legs[.client]!.channel
        let server = legs[.server]!.channel
        kernelFlows = (
            KernelFlow(from: client.remoteAddress, to: client.localAddress),
            KernelFlow(from: server.localAddress, to: server.remoteAddress)
        )
        return kernelFlows
    }
}
