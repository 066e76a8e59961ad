import ChaosCore
import NIOCore
import Testing

@testable import ChaosProxy

@Suite("Shaper state machine")
struct ShaperTests {
    let ms: Int64 = 1_000_000

    func bytes(_ count: Int, _ value: UInt8 = 1) -> ByteBuffer { ByteBuffer(bytes: [UInt8](repeating: value, count: count)) }

    @Test("with no settings everything passes through at once")
    func passThrough() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        #expect(shaper.isPassThrough)
        shaper.enqueue(.data(bytes(10)), now: 0)
        #expect(shaper.next(now: 0) == .emit(.data(bytes(10))))
        #expect(shaper.next(now: 0) == .idle)
        #expect(shaper.isPassThrough)
    }

    @Test("latency delays each write by the added time, in order")
    func latency() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(latency: 100 * ms))
        shaper.enqueue(.data(bytes(1, 1)), now: 0)
        shaper.enqueue(.data(bytes(1, 2)), now: 10 * ms)
        #expect(shaper.next(now: 0) == .wait(until: 100 * ms))
        #expect(shaper.next(now: 100 * ms) == .emit(.data(bytes(1, 1))))
        #expect(shaper.next(now: 100 * ms) == .wait(until: 110 * ms))
        #expect(shaper.next(now: 110 * ms) == .emit(.data(bytes(1, 2))))
    }

    @Test("jitter varies the delay but never reorders")
    func jitterKeepsOrder() {
        var shaper = Shaper(generator: SeededGenerator(seed: 3))
        shaper.update(ShapingSettings(latency: 50 * ms, jitter: 40 * ms))
        for index in 0..<200 { shaper.enqueue(.data(bytes(1, UInt8(index))), now: Int64(index) * ms) }
        var now: Int64 = 0
        var order: [UInt8] = []
        var lastRelease: Int64 = 0
        while order.count < 200 {
            switch shaper.next(now: now) {
            case .emit(.data(var buffer)):
                order.append(buffer.readInteger()!)
                #expect(now >= lastRelease)
                lastRelease = now
            case .wait(let until): now = until
            default:
                Issue.record("stuck")
                return
            }
        }
        #expect(order == (0..<200).map { UInt8($0) })
    }

    @Test("a bandwidth cap spaces the bytes out at the rate")
    func bandwidth() {
        var shaper = Shaper(highWater: 10_000_000, generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(bytesPerSecond: 1_000_000))
        shaper.enqueue(.data(bytes(1_000_000)), now: 0)
        var now: Int64 = 0
        var sent = 0
        while sent < 1_000_000 {
            switch shaper.next(now: now) {
            case .emit(.data(let piece)): sent += piece.readableBytes
            case .wait(let until): now = until
            default:
                Issue.record("stuck")
                return
            }
        }
        // the bucket starts with its 50 ms burst; the last piece leaves one piece-time before the end
        #expect(now >= 930 * ms && now <= 1000 * ms, "1 MB at 1 MB/s took \(now / ms) ms")
    }

    @Test("a hold keeps everything, including the half-close behind it, until it is lifted")
    func holdAndHalfClose() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(hold: true))
        shaper.enqueue(.data(bytes(5)), now: 0)
        shaper.enqueue(.shutdownOutput, now: 0)
        #expect(shaper.next(now: 1_000 * ms) == .idle)
        #expect(shaper.heldBytes == 5)
        shaper.update(.none)
        #expect(shaper.next(now: 1_000 * ms) == .emit(.data(bytes(5))))
        #expect(shaper.next(now: 1_000 * ms) == .emit(.shutdownOutput))
        #expect(shaper.next(now: 1_000 * ms) == .idle)
    }

    @Test("past the high-water mark it asks for a pause, and at the low-water mark for a resume")
    func pressure() {
        var shaper = Shaper(highWater: 1000, generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(hold: true))
        #expect(shaper.enqueue(.data(bytes(600)), now: 0) == false)
        #expect(shaper.enqueue(.data(bytes(600)), now: 0) == true)
        #expect(shaper.isPressured)
        #expect(shaper.relievePressure() == false)
        shaper.update(.none)
        _ = shaper.next(now: 0)
        #expect(shaper.heldBytes == 600)
        #expect(shaper.relievePressure() == false)
        _ = shaper.next(now: 0)
        #expect(shaper.relievePressure() == true)
    }

    @Test("slice cuts a write into pieces of at most the size, with delays between them")
    func slice() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(sliceBytes: 4, sliceDelay: (1 * ms)...(2 * ms)))
        shaper.enqueue(.data(bytes(10)), now: 0)
        var now: Int64 = 0
        var pieces: [Int] = []
        var times: [Int64] = []
        while pieces.reduce(0, +) < 10 {
            switch shaper.next(now: now) {
            case .emit(.data(let piece)):
                pieces.append(piece.readableBytes)
                times.append(now)
            case .wait(let until): now = until
            default:
                Issue.record("stuck")
                return
            }
        }
        #expect(pieces == [4, 4, 2])
        #expect(zip(times.dropFirst(), times).allSatisfy { $0 - $1 >= 1 * ms && $0 - $1 <= 2 * ms })
    }

    @Test("shaping effects combine: latencies add, the tightest cap wins, any hold holds, profiles count")
    func combine() {
        let settings = ShapingSettings.combining(
            [
                .latency(add: .milliseconds(100), jitter: .milliseconds(5), direction: .both),
                .link(LinkProfile.named("3g")!),
                .bandwidth(rate: ByteRate(bytesPerSecond: 50_000), direction: .downstream),
                .bandwidth(rate: ByteRate(bytesPerSecond: 1), direction: .upstream),  // the other direction
                .disconnect(mode: .reset, linger: .zero),  // shapes nothing
            ],
            direction: .downstream
        )
        #expect(settings.latency == 200 * ms)
        #expect(settings.jitter == 20 * ms)
        #expect(settings.bytesPerSecond == 50_000)
        #expect(!settings.hold)
        #expect(ShapingSettings.combining([.link(LinkProfile.named("offline")!)], direction: .upstream).hold)
        #expect(
            ShapingSettings.combining(
                [
                    .handoff(
                        from: LinkProfile.named("wifi")!,
                        to: LinkProfile.named("lte")!,
                        blackout: .seconds(Int64(1)),
                        linger: .zero
                    )
                ],
                direction: .upstream
            ).hold
        )
    }

    @Test("a FIN delay (slow_close) holds the half-close that long behind the bytes, which go at once")
    func finDelay() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        shaper.update(ShapingSettings(finDelay: 500 * ms))
        #expect(!shaper.isPassThrough)
        shaper.enqueue(.data(bytes(3)), now: 10 * ms)
        shaper.enqueue(.shutdownOutput, now: 10 * ms)
        #expect(shaper.next(now: 10 * ms) == .emit(.data(bytes(3))))
        #expect(shaper.next(now: 10 * ms) == .wait(until: 510 * ms))
        #expect(shaper.next(now: 510 * ms) == .emit(.shutdownOutput))
    }

    @Test("toxics' effects combine too: a slicer's variation rides with its slice, the longest slow_close wins, a timeout holds")
    func combineToxics() {
        let settings = ShapingSettings.combining(
            [
                .slice(maxBytes: 10, delay: DurationRange(exactly: .milliseconds(1)), direction: .downstream, variation: 4),
                .slowClose(delay: .milliseconds(100), direction: .downstream),
                .slowClose(delay: .milliseconds(300), direction: .both),
                .limitData(bytes: 5, direction: .downstream),  // the relay state machine's, not the shaper's
                .resetPeer(after: .zero, direction: .downstream),
            ],
            direction: .downstream
        )
        #expect(settings == ShapingSettings(sliceBytes: 10, sliceDelay: (1 * ms)...(1 * ms), sliceVariation: 4, finDelay: 300 * ms))
        #expect(ShapingSettings.combining([.timeout(after: nil, direction: .upstream)], direction: .upstream).hold)
        #expect(ShapingSettings.combining([.timeout(after: nil, direction: .upstream)], direction: .downstream) == .none)
    }
}
