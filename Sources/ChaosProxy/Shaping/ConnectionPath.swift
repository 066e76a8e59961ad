package import ChaosCore

/// What both directions of one connection share on the emulated mobile path: the radio (the proxy's, or its own for
/// `per: connection`), the NAT's idle clock, and where the path's events go. Both legs of a connection live on one
/// event loop, so only the proxy's radio is locked.
package final class ConnectionPath {
    /// The radio every connection of the proxy shares.
    let proxyRadio: RadioClock
    /// This connection's own radio (`per: connection`).
    let ownRadio = RadioClock()
    /// When the last byte either way came while a NAT watched (nanoseconds); nil: none yet.
    private var lastByte: Int64?
    /// When the NAT forgot the connection (nanoseconds); nil: it has not.
    package private(set) var natExpiredAt: Int64?
    /// The promotion already reported for this connection (its end), so that each is counted once.
    private var reportedPromotion: Int64 = .min
    /// Receives the path's events (time in the shaper's nanoseconds), when set.
    package var onEvent: ((Int64, TrafficEvent.PathEvent) -> Void)?
    /// Told once, when the NAT forgets the connection (the path is dead both ways from then on).
    package var onDeath: (() -> Void)?

    /// A path whose radio, unless per connection, is `proxyRadio`.
    package init(proxyRadio: RadioClock) { self.proxyRadio = proxyRadio }

    /// Whether the NAT has forgotten the connection: nothing passes either way any more.
    package var isDead: Bool { natExpiredAt != nil }

    /// A NAT with `idleTimeout` began watching at `now`: its idle clock starts there.
    func natBegan(at now: Int64) {
        if lastByte == nil { lastByte = now }
    }

    /// A byte either way at `now` under a NAT that forgets after `idleTimeout`: the connection dies when it was idle
    /// that long.
    func natSaw(at now: Int64, idleTimeout: Int64) {
        guard natExpiredAt == nil else { return }
        if let last = lastByte, now - last >= idleTimeout {
            natExpiredAt = last.saturatingAdding(idleTimeout)
            onEvent?(now, .natExpired(idleTimeout: idleTimeout, idleFor: now - natExpiredAt!))
            onDeath?()
            return
        }
        lastByte = now
    }

    /// When a byte that comes at `now` crosses the radio `model` (reporting a promotion it waits for, once).
    func radioAdmit(at now: Int64, _ model: RadioModel) -> Int64 {
        let at = (model.perConnection ? ownRadio : proxyRadio).admit(at: now, model)
        if at > now, at != reportedPromotion {
            reportedPromotion = at
            onEvent?(now, .radioPromotion(waited: at - now))
        }
        return at
    }

    /// A lost piece travelling `direction` arrives `delay` late.
    func retransmitted(_ direction: Direction, delay: Int64, at now: Int64) {
        onEvent?(now, .retransmission(direction, delay: delay))
    }
}
