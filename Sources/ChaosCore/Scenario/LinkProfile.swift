/// The shape of a network link: one-way latency and jitter added to every byte, and a bandwidth
/// cap per direction. Named profiles model the links phones really meet.
package struct LinkProfile: Sendable, Codable, Equatable, CustomStringConvertible {
    /// The profile's name (`wifi`, `lte`, …, or `custom`).
    package var name: String
    /// One-way delay added in each direction.
    package var latency: ChaosDuration
    /// Each delay varies uniformly by up to ± this much (order is kept).
    package var jitter: ChaosDuration
    /// Client→server cap; nil: uncapped.
    package var bandwidthUp: ByteRate?
    /// Server→client cap; nil: uncapped.
    package var bandwidthDown: ByteRate?
    /// Whether nothing passes at all (`offline`).
    package var offline: Bool
    /// The share of packets lost each way (as the `loss` fault, independent losses); nil: none.
    package var loss: Double?
    /// The phone's cellular radio (RRC states); nil: none (WiFi, or a link that is always connected).
    package var radio: RadioModel?
    /// A carrier-grade NAT's idle timeout; nil: no NAT forgets an idle connection.
    package var natIdleTimeout: ChaosDuration?

    /// Creates a profile.
    package init(
        name: String,
        latency: ChaosDuration,
        jitter: ChaosDuration,
        bandwidthUp: ByteRate?,
        bandwidthDown: ByteRate?,
        offline: Bool = false,
        loss: Double? = nil,
        radio: RadioModel? = nil,
        natIdleTimeout: ChaosDuration? = nil
    ) {
        self.radio = radio
        self.natIdleTimeout = natIdleTimeout
        self.name = name
        self.latency = latency
        self.jitter = jitter
        self.bandwidthUp = bandwidthUp
        self.bandwidthDown = bandwidthDown
        self.offline = offline
        self.loss = loss
    }

    /// The cap for bytes travelling `direction`.
    package func bandwidth(_ direction: Direction) -> ByteRate? {
        direction == .upstream ? bandwidthUp : bandwidthDown
    }

    /// The built-in profiles (numbers after Apple's Network Link Conditioner presets; latency is one-way).
    package static let builtIn: [LinkProfile] = [
        LinkProfile(
            name: "wifi",
            latency: .milliseconds(2),
            jitter: .milliseconds(1),
            bandwidthUp: .megabits(40),
            bandwidthDown: .megabits(40)
        ),
        LinkProfile(
            name: "lte",
            latency: .milliseconds(25),
            jitter: .milliseconds(5),
            bandwidthUp: .megabits(10),
            bandwidthDown: .megabits(50),
            radio: .lte
        ),
        LinkProfile(
            name: "3g",
            latency: .milliseconds(100),
            jitter: .milliseconds(20),
            bandwidthUp: .kilobits(330),
            bandwidthDown: .kilobits(780),
            radio: .umts
        ),
        LinkProfile(
            name: "edge",
            latency: .milliseconds(200),
            jitter: .milliseconds(40),
            bandwidthUp: .kilobits(200),
            bandwidthDown: .kilobits(240)
        ),
        LinkProfile(
            name: "very-bad-network",
            latency: .milliseconds(250),
            jitter: .milliseconds(100),
            bandwidthUp: .kilobits(1000),
            bandwidthDown: .kilobits(1000)
        ),
        LinkProfile(name: "offline", latency: .zero, jitter: .zero, bandwidthUp: nil, bandwidthDown: nil, offline: true),
        // Lighthouse's mobileSlow4G (core/config/constants.js): 150 ms RTT, 1.6 x 1024 kbit/s down, 750 kbit/s up.
        LinkProfile(
            name: "slow-4g",
            latency: .milliseconds(75),
            jitter: .zero,
            bandwidthUp: .kilobits(750),
            bandwidthDown: ByteRate(bytesPerSecond: 204_800)
        ),
        // WebPageTest's "3G Fast (1.6 Mbps/768 Kbps 150ms RTT)".
        LinkProfile(
            name: "fast-3g",
            latency: .milliseconds(75),
            jitter: .zero,
            bandwidthUp: .kilobits(768),
            bandwidthDown: .kilobits(1600)
        ),
        // Facebook's Augmented Traffic Control "2G - Developing Rural": 650 ms each way, 20 kbit/s down, 18 up, 2% loss.
        LinkProfile(
            name: "2g-rural",
            latency: .milliseconds(650),
            jitter: .zero,
            bandwidthUp: .kilobits(18),
            bandwidthDown: .kilobits(20),
            loss: 0.02
        ),
        // A carrier-grade NAT that forgets a connection idle for 5 minutes; nothing else shaped.
        LinkProfile(
            name: "cgnat",
            latency: .zero,
            jitter: .zero,
            bandwidthUp: nil,
            bandwidthDown: nil,
            natIdleTimeout: CarrierNAT.defaultIdleTimeout
        ),
    ]

    /// A built-in profile by name.
    package static func named(_ name: String) -> LinkProfile? { builtIn.first { $0.name == name } }

    package var description: String {
        if offline { return name }
        let up = bandwidthUp?.description ?? "unlimited"
        let down = bandwidthDown?.description ?? "unlimited"
        return "\(name)(latency=\(latency) jitter=\(jitter) up=\(up) down=\(down)\(loss.map { " loss=\(FaultParameters.percent($0))" } ?? "")"
            + (radio.map { " radio(\($0))" } ?? "") + (natIdleTimeout.map { " nat(idle_timeout=\($0))" } ?? "") + ")"
    }
}

/// A rate in bytes per second, written `1MB/s`, `500KB`, `10mbit`, `256kbps`, `1000B/s`.
/// Decimal units (1 MB = 1,000,000 bytes), as network rates are quoted.
package struct ByteRate: Sendable, Codable, Equatable, Hashable, CustomStringConvertible {
    /// Bytes per second.
    package var bytesPerSecond: Int64

    /// Creates a rate.
    package init(bytesPerSecond: Int64) { self.bytesPerSecond = bytesPerSecond }

    package static func megabits(_ n: Int64) -> ByteRate { ByteRate(bytesPerSecond: n * 125_000) }
    package static func kilobits(_ n: Int64) -> ByteRate { ByteRate(bytesPerSecond: n * 125) }

    private static let units: [(String, Double)] = [
        ("gbps", 125_000_000), ("mbps", 125_000), ("kbps", 125), ("gbit", 125_000_000), ("mbit", 125_000),
        ("kbit", 125), ("bit", 0.125), ("bps", 0.125),
        ("gib", 1_073_741_824), ("mib", 1_048_576), ("kib", 1024),
        ("gb", 1_000_000_000), ("mb", 1_000_000), ("kb", 1000), ("b", 1),
    ]

    /// Parses a rate; nil for anything else or a rate below 1 byte per second.
    package init?(parsing text: String) {
        var t = text.trimmingWhitespace.lowercased()
        if t.hasSuffix("/s") { t.removeLast(2) }
        guard let (unit, factor) = Self.units.first(where: { t.hasSuffix($0.0) }) else { return nil }
        let number = String(t.dropLast(unit.count)).trimmingWhitespace
        guard !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }), let value = Double(number) else { return nil }
        let bytes = value * factor
        guard bytes >= 1, bytes < 1e15 else { return nil }
        bytesPerSecond = Int64(bytes.rounded())
    }

    package var description: String {
        let b = bytesPerSecond
        if b % 1_000_000 == 0 { return "\(b / 1_000_000)MB/s" }
        if b % 1000 == 0 { return "\(b / 1000)KB/s" }
        return "\(b)B/s"
    }
}

/// A size in bytes, written `256MB`, `64KiB`, `1500B` or a bare number of bytes.
package enum ByteSize {
    /// Parses a size; nil for anything else.
    package static func parse(_ text: String) -> Int64? {
        let t = text.trimmingWhitespace
        if let n = Int64(t), n >= 0 { return n }
        guard let rate = ByteRate(parsing: t), !t.lowercased().contains("bit"), !t.lowercased().hasSuffix("ps") else { return nil }
        return rate.bytesPerSecond
    }
}
