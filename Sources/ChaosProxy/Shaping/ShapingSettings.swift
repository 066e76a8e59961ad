public import ChaosCore

/// What a direction of one connection is currently subjected to: the sum of the link profile and
/// of every active fault that touches that direction.
public struct ShapingSettings: Equatable, Sendable {
    /// Added one-way delay, nanoseconds.
    public var latency: Int64 = 0
    /// Each delay varies uniformly within ± this, nanoseconds (order is kept).
    public var jitter: Int64 = 0
    /// Bytes per second cap; nil: uncapped.
    public var bytesPerSecond: Int64?
    /// Nothing passes (partition, stall, blackout, offline); data is held, bounded, and released after.
    public var hold = false
    /// Writes are cut into pieces of at most this many bytes.
    public var sliceBytes: Int?
    /// The delay between pieces of a sliced write, nanoseconds.
    public var sliceDelay: ClosedRange<Int64> = 0...0

    /// No shaping at all: bytes pass straight through.
    public static let none = ShapingSettings()

    /// Creates settings.
    public init(latency: Int64 = 0, jitter: Int64 = 0, bytesPerSecond: Int64? = nil, hold: Bool = false,
                sliceBytes: Int? = nil, sliceDelay: ClosedRange<Int64> = 0...0) {
        self.latency = latency
        self.jitter = jitter
        self.bytesPerSecond = bytesPerSecond
        self.hold = hold
        self.sliceBytes = sliceBytes
        self.sliceDelay = sliceDelay
    }
}

/// One active condition on a direction, from a link profile or a fault occurrence.
public enum ShapingCondition: Equatable, Sendable {
    case latency(add: ChaosDuration, jitter: ChaosDuration)
    case bandwidth(ByteRate)
    case hold
    case slice(maxBytes: Int, delay: DurationRange)
    case profile(LinkProfile)

    /// Combines conditions: latencies add up (held at `Int64.max` ns rather than overflowing), the tightest cap wins, any hold holds, the first slice applies.
    public static func combine(_ conditions: some Sequence<ShapingCondition>, direction: Direction) -> ShapingSettings {
        var settings = ShapingSettings.none
        func cap(_ rate: ByteRate?) {
            guard let rate else { return }
            settings.bytesPerSecond = min(settings.bytesPerSecond ?? .max, rate.bytesPerSecond)
        }
        for condition in conditions {
            switch condition {
            case .latency(let add, let jitter):
                settings.latency = settings.latency.saturatingAdding(add.nanoseconds)
                settings.jitter = max(settings.jitter, jitter.nanoseconds)
            case .bandwidth(let rate): cap(rate)
            case .hold: settings.hold = true
            case .slice(let maxBytes, let delay):
                if settings.sliceBytes == nil {
                    settings.sliceBytes = maxBytes
                    settings.sliceDelay = delay.lower.nanoseconds...delay.upper.nanoseconds
                }
            case .profile(let profile):
                if profile.offline { settings.hold = true }
                settings.latency = settings.latency.saturatingAdding(profile.latency.nanoseconds)
                settings.jitter = max(settings.jitter, profile.jitter.nanoseconds)
                cap(profile.bandwidth(direction))
            }
        }
        return settings
    }
}
