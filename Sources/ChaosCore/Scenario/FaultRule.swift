/// One entry of `faults:`: a kind, its parameters and a schedule. The timeline expands a rule
/// into ``FaultOccurrence``s.
package struct FaultRule: Sendable, Codable, Equatable {
    /// What the fault does.
    package var kind: FaultKind
    /// When it happens.
    package var schedule: Schedule
    /// The parameters; ranges are drawn per occurrence.
    @FaultCoding package var parameters: FaultParameters
    /// Only this proxy; nil: every proxy.
    package var proxy: String?
    /// Where the rule is in its file, for messages.
    package var line: Int

    /// Creates a rule.
    package init(kind: FaultKind, schedule: Schedule, parameters: FaultParameters, proxy: String?, line: Int) {
        self.kind = kind
        self.schedule = schedule
        self.parameters = parameters
        self.proxy = proxy
        self.line = line
    }
}

/// The faults of PRODUCT §3, plus `link` (a link profile for a while), plus the faults a protocol plug-in declares
/// (``protocolFault(_:)``: ChaosCore knows none of them by name).
package enum FaultKind: Sendable, Hashable {
    case disconnect, latency, bandwidth, partition, handoff, refuse, slice, stall, link
    /// Packet loss as TCP shows it to the application (retransmission delays, head-of-line blocking).
    case loss
    /// A path-MTU black hole: big writes stall, small ones pass.
    case mtu
    /// The cellular radio's RRC states: after an idle tail, the next byte waits for the radio's promotion.
    case radio
    /// A carrier-grade NAT that silently forgets a connection idle for its timeout.
    case nat
    /// A UDP path delivers some datagrams twice (a `udp://` proxy's flows only: TCP never delivers twice).
    case duplicate
    /// A UDP path holds some datagrams back behind a later one (a `udp://` proxy's flows only).
    case reorder
    /// A NAT rebinding: a UDP flow's upstream-facing port changes at an instant (a `udp://` proxy's flows only).
    case rebind
    /// New TLS handshakes hang or fail with an alert for a while (a `tls:` proxy's; live connections untouched).
    case handshake
    /// The pair's server is stopped (SIGTERM, or SIGKILL as a crash), stays down for a while, and is started again
    /// with its own command: a deploy, a crash, a broker restart.
    case restart
    /// Toxiproxy's toxics that no scenario fault does (the control API makes them; a scenario cannot name them).
    case slowClose
    case limitData
    case resetPeer
    case timeout
    /// A fault of a protocol's own, by the name its plug-in declares (``ProtocolFaultDeclaration``): a frame the
    /// proxy puts in between two of the protocol's frames at one instant, then the connection closed.
    case protocolFault(String)

    /// The kinds ChaosCore itself knows, in the order messages list them.
    package static let coreKinds: [FaultKind] = [
        .disconnect, .latency, .bandwidth, .partition, .handoff, .refuse, .slice, .stall, .link, .loss, .mtu, .radio, .nat,
        .duplicate, .reorder, .rebind, .handshake, .restart, .slowClose, .limitData, .resetPeer, .timeout,
    ]

    /// The core kinds a scenario's `faults:` may name (a plug-in's own come from its declarations).
    package static var scenarioKinds: [FaultKind] { coreKinds.filter { !$0.isToxicOnly } }

    /// Whether it acts on a UDP proxy's datagrams (drops, delays, holds, a NAT's or a radio's states, a refusal, the
    /// pair's restart, a handoff's blackout and new address); a cut, a slice, a TLS handshake or a protocol's frames are
    /// TCP's.
    package var actsOnDatagrams: Bool {
        [
            .latency, .bandwidth, .partition, .stall, .link, .loss, .mtu, .radio, .nat, .refuse, .restart, .duplicate, .reorder,
            .rebind, .handoff,
        ]
        .contains(self)
    }

    /// Whether it acts on datagrams only (a TCP connection never delivers twice or out of order).
    package var actsOnlyOnDatagrams: Bool { [.duplicate, .reorder, .rebind].contains(self) }

    /// The scenario kinds that act on datagrams, for messages.
    package static var datagramKindNames: String {
        scenarioKinds.filter(\.actsOnDatagrams).map(\.rawValue).joined(separator: ", ")
    }

    /// Whether only a Toxiproxy toxic makes it.
    package var isToxicOnly: Bool { [.slowClose, .limitData, .resetPeer, .timeout].contains(self) }

    /// Whether a protocol plug-in declares it.
    package var isProtocolFault: Bool {
        if case .protocolFault = self { return true }
        return false
    }

    /// Whether the fault acts at one instant (the rest act for a while).
    package var isInstant: Bool { self == .disconnect || self == .rebind || isProtocolFault }

    /// Whether an occurrence ends as it begins, whatever its rule (a cut, a rebinding; a plug-in's fault may last).
    package var endsAsItBegins: Bool { self == .disconnect || self == .rebind }

    /// Whether the fault lasts a time of its own (a handoff its blackout, a restart its down time), not a `for`.
    package var lastsItsOwnTime: Bool { self == .handoff || self == .restart }

    /// Whether the fault acts on the pair's processes rather than on the proxies' connections (it takes no
    /// `targets` or `proxy`, and needs a `pair:`).
    package var actsOnThePair: Bool { self == .restart }
}

extension FaultKind: RawRepresentable, Codable {
    /// The name a scenario gives it (`disconnect`, `slow_close`, a plug-in's own).
    package var rawValue: String {
        switch self {
        case .disconnect: "disconnect"
        case .latency: "latency"
        case .bandwidth: "bandwidth"
        case .partition: "partition"
        case .handoff: "handoff"
        case .refuse: "refuse"
        case .slice: "slice"
        case .stall: "stall"
        case .link: "link"
        case .loss: "loss"
        case .mtu: "mtu"
        case .radio: "radio"
        case .nat: "nat"
        case .duplicate: "duplicate"
        case .reorder: "reorder"
        case .rebind: "rebind"
        case .handshake: "handshake"
        case .restart: "restart"
        case .slowClose: "slow_close"
        case .limitData: "limit_data"
        case .resetPeer: "reset_peer"
        case .timeout: "timeout"
        case .protocolFault(let name): name
        }
    }

    /// The core kind named `rawValue`, or a plug-in's fault of that name (whether a plug-in declares it is the
    /// scenario reader's and the invariants' to check); nil for an empty name.
    package init?(rawValue: String) {
        guard !rawValue.isEmpty else { return nil }
        self = Self.coreKinds.first { $0.rawValue == rawValue } ?? .protocolFault(rawValue)
    }

    package init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let kind = FaultKind(rawValue: name) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a fault kind is a name"))
        }
        self = kind
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// How a `restart` fault stops the pair's server.
package enum RestartSignal: String, Sendable, Codable, Equatable, CaseIterable {
    /// SIGTERM, then SIGKILL after the server's `stop_grace`: a deploy, a graceful restart.
    case term
    /// SIGKILL at once: a crash (nothing flushed, no goodbye to the clients).
    case kill
}

/// What a `handshake` fault does to the TLS handshakes that begin while it lasts.
package enum HandshakeMode: String, Sendable, Codable, Equatable, CaseIterable {
    /// The client's ClientHello is read and never answered until the fault ends (a captive portal, a stuck
    /// middlebox); then the handshake goes on, unless the client gave up.
    case stall
    /// The client's ClientHello is answered with a fatal `handshake_failure` alert and the connection closed.
    case fail
}

/// How `disconnect` cuts a connection.
package enum DisconnectMode: String, Sendable, Codable, Equatable, CaseIterable {
    /// RST to both sides.
    case reset
    /// FIN to both sides.
    case close
    /// RST to the client; the server leg is left half-open.
    case clientOnly = "client-only"
    /// RST to the server; the client leg is left half-open.
    case serverOnly = "server-only"
    /// FIN to both sides with no TLS close_notify before it (an app that takes it for a clean end has a truncation
    /// bug); on a cleartext connection, as `close`.
    case truncate
}

/// When a rule fires.
package struct Schedule: Sendable, Codable, Equatable {
    /// Once, at this time (drawn when a range).
    package var at: DurationRange?
    /// Repeating, with the gap between starts drawn from this range.
    package var every: DurationRange?
    /// How long each occurrence lasts; nil: until `until` or the end of the run.
    package var lasts: DurationRange?
    /// Not before this time.
    package var after: ChaosDuration
    /// Not at or after this time; nil: the end of the run.
    package var until: ChaosDuration?
    /// The chance that each occurrence happens.
    package var probability: Double
    /// Which live connections it hits.
    package var targets: Targets

    enum CodingKeys: String, CodingKey {
        case at, every
        case lasts = "for"
        case after, until, probability, targets
    }

    /// Creates a schedule.
    package init(
        at: DurationRange?,
        every: DurationRange?,
        lasts: DurationRange?,
        after: ChaosDuration = .zero,
        until: ChaosDuration? = nil,
        probability: Double = 1,
        targets: Targets = .all
    ) {
        self.at = at
        self.every = every
        self.lasts = lasts
        self.after = after
        self.until = until
        self.probability = probability
        self.targets = targets
    }
}

/// Which live connections an occurrence hits; drawn from the seed when not all.
package enum Targets: Sendable, Codable, Equatable, CustomStringConvertible {
    case all
    case count(Int)
    case fraction(Double)
    /// Each connection, live and new, with this probability, drawn once per connection from the occurrence's
    /// seed (Toxiproxy's `toxicity`; see ``ConnectionDraw``).
    case each(Double)

    package var description: String {
        switch self {
        case .all: "all"
        case .count(let n): "\(n)"
        // A damaged fraction (infinite, NaN, huge) is shown as it is: rounding it to an Int would trap.
        case .fraction(let f): f.isFinite && abs(f) <= 1e9 ? "\(Int((f * 100).rounded()))%" : "\(f)"
        case .each(let p): "each with probability \(p)"
        }
    }

    /// Picks the targets among `candidates` (sorted for determinism) with `generator`.
    package func pick(from candidates: [ConnectionID], using generator: inout SeededGenerator) -> [ConnectionID] {
        let sorted = candidates.sorted()
        let wanted: Int
        switch self {
        case .all: return sorted
        case .each: return sorted  // each is drawn where it is met (ConnectionDraw)
        case .count(let n): wanted = min(n, sorted.count)
        case .fraction(let f): wanted = min(sorted.count, Int((Double(sorted.count) * f).rounded(.up)))
        }
        var pool = sorted
        var chosen: [ConnectionID] = []
        for _ in 0..<wanted {
            let index = Int(generator.next(upperBound: UInt64(pool.count)))
            chosen.append(pool.remove(at: index))
        }
        return chosen.sorted()
    }
}

/// The draw of an occurrence whose targets are ``Targets/each(_:)``: whether it reaches a connection, drawn once
/// per (occurrence, connection), so that the same seed reaches the same connections whatever order they arrive in.
package struct ConnectionDraw: Sendable, Hashable, Codable {
    /// The chance that it reaches a connection.
    package var probability: Double
    /// The seed of the draws (the occurrence's).
    package var seed: UInt64

    /// A draw reaching each connection with `probability`, from `seed`.
    package init(probability: Double, seed: UInt64) {
        self.probability = probability
        self.seed = seed
    }

    /// Whether it reaches connection `id`.
    package func reaches(_ id: ConnectionID) -> Bool {
        guard probability < 1 else { return true }
        var generator = SeededGenerator(seed: seed).fork("connection", id)
        return generator.nextUnit() < probability
    }
}
