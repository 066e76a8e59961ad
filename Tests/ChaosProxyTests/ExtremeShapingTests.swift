import ChaosCore
import NIOCore
import Testing

@testable import ChaosProxy

/// Absurd but legal shaping values hold rather than trap.
@Suite("Extreme shaping values")
struct ExtremeShapingTests {
    let huge = ChaosDuration.nanoseconds(2_000_000 * 3_600 * 1_000_000_000)  // 2,000,000 h

    @Test("overlapping huge latencies, a huge baseline and many faults add up to 'forever', not a trap")
    func hugeLatencies() {
        let settings = ShapingSettings.combining(
            [
                .link(LinkProfile(name: "x", latency: huge, jitter: .zero, bandwidthUp: nil, bandwidthDown: nil)),
                .latency(add: huge, jitter: .zero, direction: .both), .latency(add: huge, jitter: .zero, direction: .both),
            ]
                + Array(repeating: .latency(add: .milliseconds(1), jitter: .zero, direction: .both), count: 1000),
            direction: .downstream
        )
        #expect(settings.latency == .max)
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        shaper.update(settings)
        shaper.enqueue(.data(ByteBuffer(bytes: [1])), now: 5_000_000_000)
        #expect(shaper.next(now: 5_000_000_000) == .wait(until: .max))
    }

    @Test("a jitter above 2^62 ns is drawn without trapping, and order is kept")
    func hugeJitter() {
        var shaper = Shaper(generator: SeededGenerator(seed: 3))
        shaper.update(ShapingSettings(latency: 0, jitter: Int64.max))
        for value in 0..<20 { shaper.enqueue(.data(ByteBuffer(bytes: [UInt8(value)])), now: Int64(value)) }
        var last = Int64.min
        while case .wait(let until) = shaper.next(now: last) {
            #expect(until >= last)
            last = until
            if case .emit = shaper.next(now: until) {} else { break }
        }
    }

    @Test("a bandwidth of 0 bytes/s (a damaged run folder) does not divide by zero")
    func zeroBandwidth() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(bytesPerSecond: 0))
        shaper.enqueue(.data(ByteBuffer(bytes: [1, 2, 3])), now: 0)
        if case .emit = shaper.next(now: 0) {} else { Issue.record("the first piece goes") }
    }
}
