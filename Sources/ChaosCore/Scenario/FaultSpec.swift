/// A field of a fault that the seed draws: a ``DurationRange`` as written, a ``ChaosDuration`` once drawn (a
/// range of one value).
package protocol FaultSpan: Sendable, Codable, Equatable, CustomStringConvertible {
    /// The span as a range (a drawn value is a range of one), so that one set of rules checks both.
    var range: DurationRange { get }
}

extension DurationRange: FaultSpan {
    package var range: DurationRange { self }
}

extension ChaosDuration: FaultSpan {
    package var range: DurationRange { DurationRange(exactly: self) }
}

/// One fault's parameters, from scenario to effect. `Span` is what its drawn fields hold: a rule holds ranges
/// (``FaultParameters``), a timeline's occurrence the values the seed drew from them (``FaultEffect``). A
/// slice's delay stays a range in both (it is drawn per piece, as the bytes pass).
///
/// The last four cases and a slice's `variation` are Toxiproxy's toxics (`slow_close`, `limit_data`,
/// `reset_peer`, `timeout`, a slicer's `size_variation`): the control API makes them; a scenario cannot.
package enum FaultSpec<Span: FaultSpan>: Sendable, Codable, Equatable {
    case disconnect(mode: DisconnectMode, linger: ChaosDuration)
    case latency(add: Span, jitter: ChaosDuration, direction: DirectionSet)
    case bandwidth(rate: ByteRate, direction: DirectionSet)
    case partition(direction: DirectionSet)
    case stall(direction: DirectionSet)
    case refuse
    /// WiFi → another network: for `deadWiFi` (when given) the old network is connected without internet (live and
    /// new connections hang), then for `blackout` nothing passes; then every connection that went the old way is cut
    /// on the client side, new ones get the `to` profile and, with `newAddress`, reach the upstream from the next
    /// local address of that pool.
    case handoff(
        from: LinkProfile,
        to: LinkProfile,
        blackout: Span,
        linger: ChaosDuration,
        deadWiFi: Span? = nil,
        newAddress: [String]? = nil
    )
    /// Writes cut into pieces of `maxBytes` (± up to `variation`, drawn per piece), `delay` apart.
    case slice(maxBytes: Int, delay: DurationRange, direction: DirectionSet, variation: Int? = nil)
    case link(LinkProfile)
    /// TCP under packet loss as the application sees it: each MSS-sized piece that way is lost with a seeded
    /// Gilbert-Elliott model (`rate` of pieces lost on average, in bursts of `burst` pieces on average) and arrives
    /// after a retransmission timeout (200 ms, doubling while its retransmissions are lost), order kept.
    case loss(rate: Double, burst: Double, direction: DirectionSet)
    /// A path-MTU black hole: writes that fit a `size`-byte packet pass; the first larger one that way stalls that
    /// direction (held, bounded) for as long as the fault lasts.
    case mtu(size: Int, direction: DirectionSet)
    /// The cellular radio's RRC state machine (``RadioModel``) while it lasts.
    case radio(RadioModel)
    /// A carrier-grade NAT: a connection with no byte either way for `idleTimeout` is silently dead from then on
    /// (nothing passes either way, no FIN, no RST) until a side gives up; new connections start afresh.
    case nat(idleTimeout: ChaosDuration)
    /// A share of a UDP flow's datagrams is delivered twice.
    case duplicate(rate: Double, direction: DirectionSet)
    /// A share of a UDP flow's datagrams is held back until the next one has gone.
    case reorder(rate: Double, direction: DirectionSet)
    /// Every UDP flow it reaches continues from a new upstream-facing port (a NAT rebinding).
    case rebind
    /// A fault a protocol plug-in declares: saved under its own name by ``FaultCoding``, never as this
    /// case.
    case protocolFault(ProtocolFault)
    /// New TLS handshakes on a `tls:` proxy hang (`stall`) or get an alert (`fail`) while it lasts; live connections
    /// are untouched.
    case handshake(mode: HandshakeMode)
    /// The pair's server is stopped with `signal`, stays down for `down`, then is started again.
    case restart(down: Span, signal: RestartSignal)
    /// A FIN travelling that way is passed on `delay` late.
    case slowClose(delay: ChaosDuration, direction: DirectionSet)
    /// `bytes` (read since it reached the connection) pass that way, then both legs are closed.
    case limitData(bytes: Int64, direction: DirectionSet)
    /// The first bytes travelling that way (and all after) are swallowed, and `after` them both legs are reset.
    case resetPeer(after: ChaosDuration, direction: DirectionSet)
    /// Nothing passes that way (held, bounded); `after` it reached the connection, what was held is dropped and
    /// both legs are closed (nil: held until lifted).
    case timeout(after: ChaosDuration?, direction: DirectionSet)

    /// The kind of fault.
    package var kind: FaultKind {
        switch self {
        case .disconnect: .disconnect
        case .latency: .latency
        case .bandwidth: .bandwidth
        case .partition: .partition
        case .stall: .stall
        case .refuse: .refuse
        case .handoff: .handoff
        case .slice: .slice
        case .link: .link
        case .loss: .loss
        case .mtu: .mtu
        case .radio: .radio
        case .nat: .nat
        case .duplicate: .duplicate
        case .reorder: .reorder
        case .rebind: .rebind
        case .protocolFault(let fault): .protocolFault(fault.kind)
        case .handshake: .handshake
        case .restart: .restart
        case .slowClose: .slowClose
        case .limitData: .limitData
        case .resetPeer: .resetPeer
        case .timeout: .timeout
        }
    }

    /// The parameters as `key=value` pairs, for timelines and reports.
    package var parameters: [(String, String)] {
        switch self {
        case .disconnect(let mode, let linger):
            mode == .reset || mode == .close ? [("mode", mode.rawValue)] : [("mode", mode.rawValue), ("linger", "\(linger)")]
        case .latency(let add, let jitter, let direction):
            [("add", "\(add)"), ("jitter", "\(jitter)"), ("direction", direction.rawValue)]
        case .bandwidth(let rate, let direction): [("rate", "\(rate)"), ("direction", direction.rawValue)]
        case .partition(let direction), .stall(let direction): [("direction", direction.rawValue)]
        case .refuse, .rebind: []
        case .handoff(let from, let to, let blackout, let linger, let deadWiFi, let newAddress):
            [("from", from.name), ("to", to.name), ("blackout", "\(blackout)"), ("linger", "\(linger)")]
                + (deadWiFi.map { [("dead_wifi", "\($0)")] } ?? [])
                + (newAddress.map { [("new_address", SourceAddressPool.describe($0))] } ?? [])
        case .slice(let maxBytes, let delay, let direction, let variation):
            [("size", "\(maxBytes)"), ("delay", "\(delay)"), ("direction", direction.rawValue)]
                + (variation.map { [("variation", "\($0)")] } ?? [])
        case .link(let profile): [("profile", profile.name)]
        case .loss(let rate, let burst, let direction):
            [("rate", Self.percent(rate)), ("burst", Self.compact(burst)), ("direction", direction.rawValue)]
        case .mtu(let size, let direction): [("size", "\(size)"), ("direction", direction.rawValue)]
        case .radio(let radio):
            [("promotion", "\(radio.promotion)"), ("tail", "\(radio.tail)")] + (radio.perConnection ? [("per", "connection")] : [])
        case .nat(let idleTimeout): [("idle_timeout", "\(idleTimeout)")]
        case .duplicate(let rate, let direction), .reorder(let rate, let direction):
            [("rate", Self.percent(rate)), ("direction", direction.rawValue)]
        case .protocolFault(let fault): fault.parameters
        case .handshake(let mode): [("mode", mode.rawValue)]
        case .restart(let down, let signal): [("down", "\(down)"), ("signal", signal.rawValue)]
        case .slowClose(let delay, let direction): [("delay", "\(delay)"), ("direction", direction.rawValue)]
        case .limitData(let bytes, let direction): [("bytes", "\(bytes)"), ("direction", direction.rawValue)]
        case .resetPeer(let after, let direction): [("after", "\(after)"), ("direction", direction.rawValue)]
        case .timeout(let after, let direction): [("after", after.map { "\($0)" } ?? "never"), ("direction", direction.rawValue)]
        }
    }

    /// `key=value key=value`.
    package var summary: String { parameters.map { "\($0.0)=\($0.1)" }.joined(separator: " ") }

    /// A fraction as a percentage: `2%`, `0.5%`.
    static func percent(_ fraction: Double) -> String { compact(fraction * 100) + "%" }

    /// A number without a trailing `.0`, rounded to 4 decimals: `3`, `2.5`.
    static func compact(_ value: Double) -> String {
        let rounded = (value * 10_000).rounded() / 10_000
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? "\(Int64(rounded))" : "\(rounded)"
    }
}

/// A fault's parameters as written: ranges not yet drawn.
package typealias FaultParameters = FaultSpec<DurationRange>

/// A fault's effect: every range the seed draws, drawn.
package typealias FaultEffect = FaultSpec<ChaosDuration>

extension FaultSpec {
    /// The same fault with each drawn field (`latency.add`, `handoff.blackout`) passed through `transform`, in
    /// field order; every other field as it is.
    package func mapSpans<Other: FaultSpan>(_ transform: (Span) throws -> Other) rethrows -> FaultSpec<Other> {
        switch self {
        case .disconnect(let mode, let linger): .disconnect(mode: mode, linger: linger)
        case .latency(let add, let jitter, let direction): .latency(add: try transform(add), jitter: jitter, direction: direction)
        case .bandwidth(let rate, let direction): .bandwidth(rate: rate, direction: direction)
        case .partition(let direction): .partition(direction: direction)
        case .stall(let direction): .stall(direction: direction)
        case .refuse: .refuse
        case .handoff(let from, let to, let blackout, let linger, let deadWiFi, let newAddress):
            // The dead WiFi is drawn after the blackout, and only when given: older timelines draw as they did.
            .handoff(
                from: from,
                to: to,
                blackout: try transform(blackout),
                linger: linger,
                deadWiFi: try deadWiFi.map(transform),
                newAddress: newAddress
            )
        case .slice(let maxBytes, let delay, let direction, let variation):
            .slice(maxBytes: maxBytes, delay: delay, direction: direction, variation: variation)
        case .link(let profile): .link(profile)
        case .loss(let rate, let burst, let direction): .loss(rate: rate, burst: burst, direction: direction)
        case .mtu(let size, let direction): .mtu(size: size, direction: direction)
        case .radio(let radio): .radio(radio)
        case .nat(let idleTimeout): .nat(idleTimeout: idleTimeout)
        case .duplicate(let rate, let direction): .duplicate(rate: rate, direction: direction)
        case .reorder(let rate, let direction): .reorder(rate: rate, direction: direction)
        case .rebind: .rebind
        case .protocolFault(let fault): .protocolFault(fault)
        case .handshake(let mode): .handshake(mode: mode)
        case .restart(let down, let signal): .restart(down: try transform(down), signal: signal)
        case .slowClose(let delay, let direction): .slowClose(delay: delay, direction: direction)
        case .limitData(let bytes, let direction): .limitData(bytes: bytes, direction: direction)
        case .resetPeer(let after, let direction): .resetPeer(after: after, direction: direction)
        case .timeout(let after, let direction): .timeout(after: after, direction: direction)
        }
    }
}

extension FaultSpec where Span == DurationRange {
    /// The effect of one occurrence: each range drawn from `generator`, in field order (the order is what a
    /// seed means).
    package func drawn(with generator: inout SeededGenerator) -> FaultEffect {
        mapSpans { generator.draw($0) }
    }
}
