package import ChaosCore

/// What a direction of one connection is currently subjected to: the sum of the link profile and
/// of every active fault that touches that direction.
package struct ShapingSettings: Equatable, Sendable {
    /// Added one-way delay, nanoseconds.
    package var latency: Int64 = 0
    /// Each delay varies uniformly within ± this, nanoseconds (order is kept).
    package var jitter: Int64 = 0
    /// Bytes per second cap; nil: uncapped.
    package var bytesPerSecond: Int64?
    /// Nothing passes (partition, stall, blackout, offline); data is held, bounded, and released after.
    package var hold = false
    /// The hold is a dead path (partition, stall, a handoff's blackout, offline; not a `timeout` toxic): where the
    /// kernel path is available (``KernelDeadPath``) the direction's segments are dropped, so no TCP acknowledges them.
    package var deadPath = false
    /// Writes are cut into pieces of at most this many bytes.
    package var sliceBytes: Int?
    /// The delay between pieces of a sliced write, nanoseconds.
    package var sliceDelay: ClosedRange<Int64> = 0...0
    /// Each piece is `sliceBytes` ± up to this many bytes, drawn per piece (Toxiproxy's slicer `size_variation`).
    package var sliceVariation = 0
    /// A half-close (FIN) waits this much longer than the bytes would, nanoseconds (Toxiproxy's `slow_close`).
    package var finDelay: Int64 = 0
    /// Packet loss as TCP shows it (``LossModel``); nil: none.
    package var loss: LossModel?
    /// The largest write that fits one packet of a path-MTU black hole (its `size` minus IP and TCP headers); nil: none.
    package var mtuPayload: Int?
    /// The phone's radio (RRC states) the bytes cross; nil: none.
    package var radio: RadioModel?
    /// A NAT forgets the connection after this many nanoseconds with no byte either way; nil: none.
    package var natIdleTimeout: Int64?
    /// The share of datagrams delivered twice (UDP flows only).
    package var duplicateRate = 0.0
    /// The share of datagrams held back behind the next one (UDP flows only).
    package var reorderRate = 0.0

    /// No shaping at all: bytes pass straight through.
    package static let none = ShapingSettings()

    /// Creates settings.
    package init(
        latency: Int64 = 0,
        jitter: Int64 = 0,
        bytesPerSecond: Int64? = nil,
        hold: Bool = false,
        sliceBytes: Int? = nil,
        sliceDelay: ClosedRange<Int64> = 0...0,
        sliceVariation: Int = 0,
        finDelay: Int64 = 0,
        loss: LossModel? = nil,
        mtuPayload: Int? = nil,
        radio: RadioModel? = nil,
        natIdleTimeout: Int64? = nil
    ) {
        self.radio = radio
        self.natIdleTimeout = natIdleTimeout
        self.latency = latency
        self.jitter = jitter
        self.bytesPerSecond = bytesPerSecond
        self.hold = hold
        self.sliceBytes = sliceBytes
        self.sliceDelay = sliceDelay
        self.sliceVariation = sliceVariation
        self.finDelay = finDelay
        self.loss = loss
        self.mtuPayload = mtuPayload
    }
}

extension ShapingSettings {
    /// What one direction of a connection applies under `effects` (its link profile comes as `.link`):
    /// latencies add up (held at `Int64.max` ns rather than overflowing), the widest jitter and the
    /// tightest cap win, any hold holds (a `timeout` holds until it runs out), the first slice applies, the
    /// longest FIN delay wins. Effects that do not shape bytes (disconnect, refuse; limit_data and reset_peer
    /// act in the relay state machine) or not in this direction are passed over.
    ///
    /// A fault's parameter travels three stages: what the user wrote (``FaultParameters``), what the seed drew
    /// (``FaultEffect``: the same ``FaultSpec`` with its ranges drawn), and what a connection applies
    /// (``ShapingSettings``).
    package static func combining(_ effects: some Sequence<FaultEffect>, direction: Direction) -> ShapingSettings {
        var settings = ShapingSettings.none
        func cap(_ rate: ByteRate?) {
            guard let rate else { return }
            settings.bytesPerSecond = min(settings.bytesPerSecond ?? .max, rate.bytesPerSecond)
        }
        for effect in effects where effect.shapes(direction) {
            switch effect {
            case .latency(let add, let jitter, _):
                settings.latency = settings.latency.saturatingAdding(add.nanoseconds)
                settings.jitter = max(settings.jitter, jitter.nanoseconds)
            case .bandwidth(let rate, _): cap(rate)
            case .partition, .stall, .handoff:  // a handoff holds both ways in its blackout
                settings.hold = true
                settings.deadPath = true
            case .timeout: settings.hold = true
            case .slice(let maxBytes, let delay, _, let variation):
                if settings.sliceBytes == nil {
                    settings.sliceBytes = maxBytes
                    settings.sliceDelay = delay.lower.nanoseconds...delay.upper.nanoseconds
                    settings.sliceVariation = variation ?? 0
                }
            case .slowClose(let delay, _): settings.finDelay = max(settings.finDelay, delay.nanoseconds)
            case .loss(let rate, let burst, _):
                // The heaviest loss wins.
                if rate > (settings.loss?.rate ?? -1) { settings.loss = LossModel(rate: rate, burst: burst) }
            case .mtu(let size, _):
                let payload = max(1, size - LossModel.headerBytes)
                settings.mtuPayload = min(settings.mtuPayload ?? .max, payload)
            case .radio(let radio): settings.add(radio)
            case .nat(let idleTimeout): settings.addNAT(idleTimeout)
            case .duplicate(let rate, _): settings.duplicateRate = max(settings.duplicateRate, rate)
            case .reorder(let rate, _): settings.reorderRate = max(settings.reorderRate, rate)
            case .link(let profile):
                if profile.offline {
                    settings.hold = true
                    settings.deadPath = true
                }
                settings.latency = settings.latency.saturatingAdding(profile.latency.nanoseconds)
                settings.jitter = max(settings.jitter, profile.jitter.nanoseconds)
                cap(profile.bandwidth(direction))
                if let rate = profile.loss, rate > (settings.loss?.rate ?? -1) { settings.loss = LossModel(rate: rate, burst: 1) }
                if let radio = profile.radio { settings.add(radio) }
                if let idleTimeout = profile.natIdleTimeout { settings.addNAT(idleTimeout) }
            case .disconnect, .refuse, .protocolFault, .handshake, .restart, .limitData, .resetPeer, .rebind: break
            }
        }
        return settings
    }

    /// The slowest radio wins (the longest promotion; then the shortest tail, which idles soonest).
    private mutating func add(_ radio: RadioModel) {
        guard let current = self.radio else {
            self.radio = radio
            return
        }
        if (radio.promotion, -radio.tail.nanoseconds) > (current.promotion, -current.tail.nanoseconds) { self.radio = radio }
    }

    /// The NAT that forgets soonest wins.
    private mutating func addNAT(_ idleTimeout: ChaosDuration) {
        natIdleTimeout = min(natIdleTimeout ?? .max, max(1, idleTimeout.nanoseconds))
    }
}

extension FaultEffect {
    /// Whether this effect shapes the bytes flowing in `direction` (a disconnect or a refusal never does).
    package func shapes(_ direction: Direction) -> Bool {
        switch self {
        case .latency(_, _, let directions), .bandwidth(_, let directions), .partition(let directions),
            .stall(let directions), .slice(_, _, let directions, _), .slowClose(_, let directions), .timeout(_, let directions),
            .loss(_, _, let directions), .mtu(_, let directions), .duplicate(_, let directions), .reorder(_, let directions):
            directions.contains(direction)
        case .handoff, .link, .radio, .nat: true
        case .disconnect, .refuse, .protocolFault, .handshake, .restart, .limitData, .resetPeer, .rebind: false
        }
    }

    /// Whether it shapes bytes at all.
    package var isShaping: Bool { Direction.allCases.contains(where: shapes) }

    /// Whether it makes the path dead where it reaches (``ShapingSettings/deadPath``), or may (a NAT that forgets an
    /// idle connection).
    package var makesDeadPath: Bool {
        switch self {
        case .partition, .stall, .handoff, .nat: true
        case .link(let profile): profile.offline || profile.natIdleTimeout != nil
        default: false
        }
    }
}

/// Names one fault's shaping on a connection: which timeline it came from (0 for a scenario's, the
/// fault's id for one added through the control API) and its occurrence's index there. Shaping is
/// applied in key order: a timeline's faults in the order they began.
package struct ShapingKey: Hashable, Comparable, Sendable {
    /// The timeline: 0 for the run's own.
    package var timeline: Int
    /// The occurrence's index in that timeline.
    package var occurrence: Int

    /// The timeline of the keys of instant protocol faults whose effect outlived them (no timeline's own).
    static let lingeringTimeline = -1

    /// A key for `occurrence` of `timeline`.
    package init(timeline: Int = 0, occurrence: Int) {
        self.timeline = timeline
        self.occurrence = occurrence
    }

    package static func < (lhs: ShapingKey, rhs: ShapingKey) -> Bool {
        (lhs.timeline, lhs.occurrence) < (rhs.timeline, rhs.occurrence)
    }
}
