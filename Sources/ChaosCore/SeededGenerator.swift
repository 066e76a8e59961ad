/// The one source of randomness in chaos: xoshiro256** seeded through SplitMix64.
///
/// Same seed, same sequence, on every platform and every Swift version: nothing here calls the
/// system generator. `fork(_:)` derives independent child generators (one per fault rule, one per
/// connection) so that adding a rule or a connection does not shift the draws of the others.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)
    /// The seed this generator started from.
    package let seed: UInt64

    /// A generator whose whole sequence is determined by `seed`.
    package init(seed: UInt64) {
        self.seed = seed
        var mixer = SplitMix64(state: seed)
        state = (mixer.next(), mixer.next(), mixer.next(), mixer.next())
    }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        let result = rotateLeft(state.1 &* 5, 7) &* 9
        let t = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= t
        state.3 = rotateLeft(state.3, 45)
        return result
    }

    /// An independent generator for a named purpose: the same (seed, label, index) gives the same child.
    package func fork(_ label: String, _ index: UInt64 = 0) -> SeededGenerator {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a over the label's UTF-8
        for byte in label.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        var mixer = SplitMix64(state: seed ^ hash ^ (index &* 0x9e37_79b9_7f4a_7c15))
        return SeededGenerator(seed: mixer.next())
    }

    /// A uniform double in [0, 1).
    package mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A duration drawn uniformly from the closed range.
    package mutating func draw(_ range: DurationRange) -> ChaosDuration {
        if range.lower == range.upper { return range.lower }
        let width = UInt64(range.upper.nanoseconds - range.lower.nanoseconds) + 1
        return ChaosDuration(nanoseconds: range.lower.nanoseconds + Int64(next(upperBound: width)))
    }

    /// A uniform integer in `0..<upperBound` without modulo bias.
    package mutating func next(upperBound: UInt64) -> UInt64 {
        precondition(upperBound > 0)
        let threshold = (0 &- upperBound) % upperBound
        while true {
            let value = next()
            if value >= threshold { return value % upperBound }
        }
    }

    private func rotateLeft(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}

/// SplitMix64, used only to expand a seed into generator state.
struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
