import ChaosCore
import Testing

@testable import ChaosProxy

/// One direction of a UDP flow under its settings, in virtual time (nanoseconds): what each datagram becomes.
@Suite("Datagram shaper")
struct DatagramShaperTests {
    static let ms: Int64 = 1_000_000

    static func shaper(_ settings: ShapingSettings, held: Int = 1 << 20, seed: UInt64 = 1) -> DatagramShaper {
        var shaper = DatagramShaper(maxHeldBytes: held, generator: SeededGenerator(seed: seed))
        shaper.settings = settings
        return shaper
    }

    static let noRadio: @Sendable (Int64, RadioModel) -> Int64 = { now, _ in now }

    @Test("nothing set: every datagram goes at once")
    func passesThrough() {
        var shaper = Self.shaper(.none)
        #expect(shaper.admit(size: 1_200, at: 5, radio: Self.noRadio) == .send(at: 5))
        #expect(shaper.heldBytes == 0)
    }

    @Test("a bandwidth cap serialises datagrams one behind the other, and its queue drops the newest when full (drop-tail)")
    func bandwidthDropTail() {
        // 1,000,000 bytes/s: a 1,000-byte datagram takes 1 ms on the link.
        var shaper = Self.shaper(ShapingSettings(bytesPerSecond: 1_000_000))
        #expect(shaper.admit(size: 1_000, at: 0, radio: Self.noRadio) == .send(at: 1 * Self.ms))
        #expect(shaper.admit(size: 1_000, at: 0, radio: Self.noRadio) == .send(at: 2 * Self.ms))
        var verdicts: [DatagramVerdict] = []
        for _ in 0..<400 { verdicts.append(shaper.admit(size: 1_000, at: 0, radio: Self.noRadio)) }
        let sent = verdicts.filter { if case .send = $0 { true } else { false } }.count
        #expect(sent + 2 <= DatagramShaper.bandwidthQueueBytes / 1_000 + 1, "the queue holds at most 256 KiB: \(sent + 2) sent")
        #expect(verdicts.last == .drop(.queue))
        // Once the link has drained, datagrams pass again.
        #expect(shaper.admit(size: 1_000, at: 10_000 * Self.ms, radio: Self.noRadio) == .send(at: 10_001 * Self.ms))
    }

    @Test("what waits for later sending is bounded: past the most held, datagrams are dropped; released bytes make room")
    func heldIsBounded() {
        var shaper = Self.shaper(ShapingSettings(latency: 50 * Self.ms), held: 3_000)
        for _ in 0..<3 { #expect(shaper.admit(size: 1_000, at: 0, radio: Self.noRadio) == .send(at: 50 * Self.ms)) }
        #expect(shaper.admit(size: 1_000, at: 0, radio: Self.noRadio) == .drop(.queue))
        shaper.released(size: 1_000)
        #expect(shaper.admit(size: 1_000, at: 1, radio: Self.noRadio) == .send(at: 50 * Self.ms + 1))
    }

    @Test("jitter delays each datagram on its own (a later one may go first), never before now, the same way for the same seed")
    func jitterIsSeeded() {
        func times(seed: UInt64) -> [Int64] {
            var shaper = Self.shaper(ShapingSettings(latency: 10 * Self.ms, jitter: 8 * Self.ms), seed: seed)
            return (0..<50).map { index in
                guard case .send(let at, _, _) = shaper.admit(size: 100, at: Int64(index) * Self.ms, radio: Self.noRadio) else { return -1 }
                shaper.released(size: 100)
                return at
            }
        }
        let first = times(seed: 3)
        #expect(first == times(seed: 3))
        #expect(first != times(seed: 4))
        #expect(zip(first, first.dropFirst()).contains { $0 > $1 }, "some datagram overtakes the one before it")
        #expect(first.enumerated().allSatisfy { $0.element >= Int64($0.offset) * Self.ms + 2 * Self.ms })
    }

    @Test("a hold drops (a dead path), a datagram over the MTU is dropped, and the radio's promotion delays the first after its tail")
    func dropsAndRadio() {
        var held = Self.shaper(ShapingSettings(hold: true))
        #expect(held.admit(size: 10, at: 0, radio: Self.noRadio) == .drop(.deadPath))
        var mtu = Self.shaper(ShapingSettings(mtuPayload: 1_200 - LossModel.headerBytes))
        #expect(mtu.admit(size: 1_172, at: 0, radio: Self.noRadio) == .send(at: 0))
        #expect(mtu.admit(size: 1_173, at: 0, radio: Self.noRadio) == .drop(.mtu))
        var radio = Self.shaper(ShapingSettings(radio: RadioModel(promotion: .milliseconds(400), tail: .seconds(Int64(5)))))
        #expect(radio.admit(size: 10, at: 0, radio: { now, _ in now + 400 * Self.ms }) == .send(at: 400 * Self.ms))
    }

    @Test("duplicate and reorder mark a seeded share of the datagrams that go; none when their rates are 0")
    func duplicateAndReorderDraws() {
        func verdicts(seed: UInt64) -> [DatagramVerdict] {
            var settings = ShapingSettings.none
            settings.duplicateRate = 0.2
            settings.reorderRate = 0.3
            var shaper = Self.shaper(settings, seed: seed)
            return (0..<1_000).map { shaper.admit(size: 100, at: Int64($0), radio: Self.noRadio) }
        }
        let drawn = verdicts(seed: 9)
        #expect(drawn == verdicts(seed: 9))
        let twice = drawn.filter { if case .send(_, 2, _) = $0 { true } else { false } }.count
        let held = drawn.filter { if case .send(_, _, true) = $0 { true } else { false } }.count
        #expect((150...250).contains(twice) && (250...350).contains(held), "\(twice) duplicated, \(held) held back")
    }
}
