import ChaosCore
import NIOCore

/// One client address's datagrams through a UDP proxy, as a NAT keeps them: its own socket toward the upstream (the
/// mapping's port), a shaper per direction, the path it shares with the NAT and the radio, and the time of its last
/// datagram either way (the idle timeout's clock). Lives on its relay's event loop.
final class DatagramFlow: @unchecked Sendable {
    /// The flow's number, unique among the run's connections and flows.
    let id: ConnectionID
    /// The client's address and port.
    let client: SocketAddress
    /// The flow's socket toward the upstream (its port is the mapping); nil while it is being opened.
    var upstream: (any Channel)?
    /// The upstream's address, resolved when the first socket opened.
    var upstreamAddress: SocketAddress?
    /// The client's datagrams that came before the upstream socket was ready, not yet shaped (bounded by
    /// ``DatagramRelay/pendingLimit``).
    var pending: [ByteBuffer] = []
    /// What shapes each direction (`[0]` upstream, `[1]` downstream).
    var shapers: [DatagramShaper]
    /// The NAT's clock and the radio this flow crosses.
    let path: ConnectionPath
    /// The faults shaping this flow, by key.
    var effects: [ShapingKey: FaultEffect] = [:]
    /// When the last datagram either way came (nanoseconds of the run's clock).
    var lastActivity: Int64
    /// Bytes written to each side so far (`[0]` the client, `[1]` the server): a datagram the kernel took is
    /// delivered, as far as the proxy can know, so the audit's acknowledgement follows each write at once.
    var written: [Int64] = [0, 0]
    /// The datagram a `reorder` fault holds back in each direction (`[0]` upstream, `[1]` downstream), until the
    /// next one has gone or its time is up.
    var heldBack: [HeldDatagram?] = [nil, nil]
    /// Whether the flow has ended (idle, a NAT forgot it, the proxy stopped): nothing more passes.
    var isClosed = false
    /// The shortest idle timeout of a NAT watching the flow either way (nil: none), kept with the settings so that
    /// each datagram asks one property, not both shapers.
    private(set) var natIdleTimeout: Int64?

    init(id: ConnectionID, client: SocketAddress, shapers: [DatagramShaper], path: ConnectionPath, now: Int64) {
        self.id = id
        self.client = client
        self.shapers = shapers
        self.path = path
        self.lastActivity = now
    }

    /// A datagram held back, how many times it goes, and the timer that lets it go if no later one overtakes it.
    struct HeldDatagram {
        var datagram: ByteBuffer
        var copies: Int
        var timer: Scheduled<Void>
    }

    /// The shaper of the datagrams travelling `direction`.
    func shaperIndex(_ direction: Direction) -> Int { direction == .upstream ? 0 : 1 }

    /// Recomputes both directions' settings from ``effects`` (the flow's link profile comes as a `.link` effect) at
    /// `now`; a NAT that starts watching starts its idle clock here.
    func applyEffects(at now: Int64) {
        let ordered = effects.sorted { $0.key < $1.key }.map(\.value)
        natIdleTimeout = nil
        for direction in Direction.allCases {
            let settings = ShapingSettings.combining(ordered, direction: direction)
            if let timeout = settings.natIdleTimeout {
                path.natBegan(at: now)
                natIdleTimeout = min(natIdleTimeout ?? .max, timeout)
            }
            shapers[shaperIndex(direction)].settings = settings
        }
    }
}
