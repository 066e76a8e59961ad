import ChaosCore

/// Why the proxy dropped a datagram. A UDP path loses instead of holding: nothing retransmits below the application.
package enum DatagramDrop: String, Sendable, CaseIterable, Hashable {
    /// A dead path (`partition`, `stall`, an `offline` link): nothing crosses it, nothing waits for it to end.
    case deadPath = "dead-path"
    /// The seeded Gilbert-Elliott model of a `loss` fault or a link profile lost it.
    case loss
    /// Larger than a `mtu` fault's packet allows (QUIC's path-MTU probes meet this).
    case mtu
    /// The link's queue was full (a `bandwidth` cap's drop-tail queue, or the most the proxy holds for a direction).
    case queue
    /// A NAT had forgotten the flow's mapping.
    case nat
    /// A new client address found the proxy holding its most flows.
    case flowLimit = "flow-limit"
    /// The kernel's send buffer toward the receiver was full, or the kernel refused the write.
    case sendBuffer = "send-buffer"
}

/// What one direction of a UDP flow does to each datagram under its current ``ShapingSettings``: dropped (a dead
/// path, loss, a packet over the MTU, a full queue) or sent at an instant (radio promotion, the bandwidth cap's
/// serialisation behind the datagrams before it, then latency with its jitter). Datagrams are independent: jitter
/// reorders them, as on a real path. Every draw comes from the flow's seeded generator; times are nanoseconds.
struct DatagramShaper {
    /// UDP and IPv4 headers: a `mtu` fault's packet size less these is the largest datagram that passes.
    static let headerBytes = 28
    /// The most bytes a `bandwidth` cap's queue holds before it drops the newest (a phone link's buffer).
    static let bandwidthQueueBytes = 256 << 10

    /// What applies now.
    var settings = ShapingSettings.none
    /// The most bytes held for later sending (delayed or queued) before datagrams are dropped.
    let maxHeldBytes: Int
    /// Bytes held for later sending.
    private(set) var heldBytes = 0
    private var generator: SeededGenerator
    private var loss = LossState()
    /// When the capped link has sent everything queued on it.
    private var linkFreeAt = Int64.min

    /// A shaper holding at most `maxHeldBytes`, drawing from `generator`.
    init(maxHeldBytes: Int, generator: SeededGenerator) {
        self.maxHeldBytes = maxHeldBytes
        self.generator = generator
    }

    /// What becomes of a datagram of `size` bytes arriving at `now`; `radio` gives when the phone's radio lets it
    /// go (the connection path's, which reports promotions).
    mutating func admit(size: Int, at now: Int64, radio: (Int64, RadioModel) -> Int64) -> DatagramVerdict {
        if settings.hold { return .drop(.deadPath) }
        if let payload = settings.mtuPayload, size > payload + LossModel.headerBytes - Self.headerBytes { return .drop(.mtu) }
        if let model = settings.loss, loss.nextLost(model, &generator) { return .drop(.loss) }
        var at = now
        if let model = settings.radio { at = max(at, radio(now, model)) }
        if let rate = settings.bytesPerSecond, rate > 0 {
            let start = max(at, linkFreeAt)
            let queued = (start - at).multipliedReportingOverflow(by: rate).partialValue / 1_000_000_000
            guard queued + Int64(size) <= Int64(Self.bandwidthQueueBytes) else { return .drop(.queue) }
            linkFreeAt = start.saturatingAdding(Int64(size) * 1_000_000_000 / rate)
            at = linkFreeAt
        }
        at = at.saturatingAdding(delay())
        if at > now {
            guard heldBytes + size <= maxHeldBytes else { return .drop(.queue) }
            heldBytes += size
        }
        let copies = Self.chance(settings.duplicateRate, &generator) ? 2 : 1
        return .send(at: at, copies: copies, heldBack: Self.chance(settings.reorderRate, &generator))
    }

    private static func chance(_ probability: Double, _ generator: inout SeededGenerator) -> Bool {
        probability > 0 && generator.nextUnit() < probability
    }

    /// A datagram held by ``admit(size:at:radio:)`` of `size` bytes has gone (sent or dropped).
    mutating func released(size: Int) { heldBytes = max(0, heldBytes - size) }

    /// The one-way delay of the next datagram: the latency, varied uniformly within ± the jitter, never negative.
    private mutating func delay() -> Int64 {
        guard settings.jitter > 0 else { return settings.latency }
        let spread = Int64(generator.nextUnit() * Double(2 * settings.jitter)) - settings.jitter
        return max(0, settings.latency.saturatingAdding(spread))
    }
}

/// What a fault did to a datagram that still went through.
package enum DatagramAlteration: String, Sendable, CaseIterable, Hashable {
    /// Sent twice (`duplicate`).
    case duplicated
    /// Held back until the next datagram of its direction had gone (`reorder`).
    case heldBack = "held-back"
}

/// What a ``DatagramShaper`` does with one datagram.
enum DatagramVerdict: Equatable {
    /// Sent at this instant (nanoseconds; now or later), `copies` times (2: a `duplicate` fault's), and when
    /// `heldBack` (a `reorder` fault's) only after the next datagram of its direction has gone.
    case send(at: Int64, copies: Int = 1, heldBack: Bool = false)
    /// Dropped, for this reason.
    case drop(DatagramDrop)
}
