import ChaosCore
import ChaosProtocols
import NIOCore
import Testing

@testable import ChaosProxy

/// `loss` and `mtu` in virtual time: what TCP under loss and a path-MTU black hole look like to the application.
@Suite("Shaper: packet loss and MTU black holes")
struct LossAndMTUShaperTests {
    let ms: Int64 = 1_000_000

    /// One piece per write, `count` writes 10 ms apart: each write's release time, in order (the bytes say which write).
    func releases(_ settings: ShapingSettings, count: Int, seed: UInt64) -> [Int64] {
        var shaper = Shaper(highWater: 1 << 30, generator: SeededGenerator(seed: seed))
        shaper.update(settings)
        for index in 0..<count {
            var buffer = ByteBuffer()
            buffer.writeInteger(UInt32(index))
            buffer.writeBytes([UInt8](repeating: 0, count: LossModel.pieceBytes - 4))
            shaper.enqueue(.data(buffer), now: Int64(index) * 10 * ms)
        }
        var now: Int64 = 0
        var times: [Int64] = []
        var next: UInt32 = 0
        while times.count < count {
            switch shaper.next(now: now) {
            case .emit(.data(var buffer)):
                let index = buffer.readInteger(as: UInt32.self)
                #expect(index == next, "order kept")
                next += 1
                times.append(now)
            case .wait(let until): now = until
            default:
                Issue.record("stuck at \(times.count)")
                return times
            }
        }
        return times
    }

    @Test(
        "2% loss: about 2% of pieces arrive one retransmission timeout (200 ms, doubling while lost again) late, those behind wait for them, exactly as the seed draws"
    )
    func lossDelaysPieces() {
        let model = LossModel(rate: 0.02, burst: 1)
        let count = 20_000
        let times = releases(ShapingSettings(loss: model), count: count, seed: 42)
        // The model with the same seed, piece by piece: each comes out at its send time plus its delay, never before
        // the one ahead of it (head-of-line blocking).
        var state = LossState()
        var generator = SeededGenerator(seed: 42)
        var expected: [Int64] = []
        var delays: [Int64] = []
        var last = Int64.min
        for index in 0..<count {
            let delay = state.delay(model, &generator)
            delays.append(delay)
            last = max(Int64(index) * 10 * ms + delay, last)
            expected.append(last)
        }
        #expect(times == expected)
        #expect(times != releases(ShapingSettings(loss: model), count: count, seed: 43), "another seed, other losses")
        let lost = delays.filter { $0 > 0 }
        #expect(Double(lost.count) / Double(count) > 0.015 && Double(lost.count) / Double(count) < 0.025, "lost \(lost.count) of \(count)")
        #expect(Set(lost).isSubset(of: [200, 600, 1_400, 3_000, 6_200].map { $0 * ms }), "\(Set(lost).sorted())")
        #expect(lost.filter { $0 >= 600 * ms }.count < lost.count / 10, "a retransmission is lost again about 2% of the time")
        let blocked = zip(expected.indices, expected).filter { index, time in delays[index] == 0 && time > Int64(index) * 10 * ms }
        #expect(!blocked.isEmpty, "pieces sent during a retransmission wait behind it")
    }

    @Test("bursty loss (burst 4): the same average rate, in runs: a piece sent right after a lost one is mostly lost too")
    func burstyLoss() {
        var state = LossState()
        var generator = SeededGenerator(seed: 7)
        let model = LossModel(rate: 0.05, burst: 4)
        var losses = 0
        var runs = 0
        var previous = false
        let count = 200_000
        for _ in 0..<count {
            let lost = state.nextLost(model, &generator)
            if lost {
                losses += 1
                if !previous { runs += 1 }
            }
            previous = lost
        }
        let rate = Double(losses) / Double(count)
        let meanRun = Double(losses) / Double(runs)
        #expect(rate > 0.045 && rate < 0.055, "rate \(rate)")
        #expect(meanRun > 3.5 && meanRun < 4.5, "mean burst \(meanRun)")
    }

    @Test("a write cut at lost pieces: the bytes before the first lost piece go on time, the rest after its retransmission")
    func bigWriteSplitsAtLoss() {
        var shaper = Shaper(highWater: 1 << 30, generator: SeededGenerator(seed: 5))
        shaper.update(ShapingSettings(loss: LossModel(rate: 0.3, burst: 1)))
        let total = 100 * LossModel.pieceBytes
        shaper.enqueue(.data(ByteBuffer(bytes: [UInt8](repeating: 9, count: total))), now: 0)
        var now: Int64 = 0
        var delivered = 0
        var releases: [Int64] = []
        while delivered < total {
            switch shaper.next(now: now) {
            case .emit(.data(let buffer)):
                #expect(buffer.readableBytes % LossModel.pieceBytes == 0 || delivered + buffer.readableBytes == total)
                delivered += buffer.readableBytes
                releases.append(now)
            case .wait(let until): now = until
            default:
                Issue.record("stuck")
                return
            }
        }
        #expect(releases.count > 1 && releases == releases.sorted())
        #expect(now >= 200 * ms)
    }

    @Test("an MTU black hole passes writes that fit one packet and stalls the direction at the first bigger one, until it ends")
    func mtuBlackHole() {
        var shaper = Shaper(generator: SeededGenerator(seed: 1))
        var settings = ShapingSettings.none
        settings.mtuPayload = 1280 - LossModel.headerBytes
        shaper.update(settings)
        shaper.enqueue(.data(ByteBuffer(bytes: [UInt8](repeating: 1, count: 500))), now: 0)
        #expect(shaper.next(now: 0) == .emit(.data(ByteBuffer(bytes: [UInt8](repeating: 1, count: 500)))))
        shaper.enqueue(.data(ByteBuffer(bytes: [UInt8](repeating: 2, count: 20_000))), now: 1)
        shaper.enqueue(.data(ByteBuffer(bytes: [UInt8](repeating: 3, count: 10))), now: 2)
        #expect(shaper.isBlackHoled)
        #expect(shaper.next(now: 10_000 * ms) == .idle, "the big write and what follows it are held")
        shaper.update(.none)
        #expect(shaper.next(now: 10_000 * ms) == .emit(.data(ByteBuffer(bytes: [UInt8](repeating: 2, count: 20_000)))))
        #expect(shaper.next(now: 10_000 * ms) == .emit(.data(ByteBuffer(bytes: [UInt8](repeating: 3, count: 10)))))
    }

    @Test("effects combine: the heaviest loss and the smallest MTU win, each only its own direction")
    func combine() {
        let effects: [FaultEffect] = [
            .loss(rate: 0.01, burst: 2, direction: .both), .loss(rate: 0.05, burst: 1, direction: .upstream),
            .mtu(size: 1500, direction: .both), .mtu(size: 576, direction: .downstream),
        ]
        let up = ShapingSettings.combining(effects, direction: .upstream)
        let down = ShapingSettings.combining(effects, direction: .downstream)
        #expect(up.loss == LossModel(rate: 0.05, burst: 1) && down.loss == LossModel(rate: 0.01, burst: 2))
        #expect(up.mtuPayload == 1460 && down.mtuPayload == 536)
    }

    @Test("the mobile profiles: slow-4g and fast-3g as Lighthouse and WebPageTest define them, 2g-rural with its 2% loss each way")
    func mobileProfiles() throws {
        let rural = try #require(LinkProfile.named("2g-rural"))
        #expect(rural.latency == .milliseconds(650) && rural.loss == 0.02)
        #expect(rural.bandwidthDown == .kilobits(20) && rural.bandwidthUp == .kilobits(18))
        for direction in Direction.allCases {
            let settings = ShapingSettings.combining([.link(rural)], direction: direction)
            #expect(settings.loss == LossModel(rate: 0.02, burst: 1) && settings.latency == 650 * ms)
        }
        let slow4g = try #require(LinkProfile.named("slow-4g"))
        let fast3g = try #require(LinkProfile.named("fast-3g"))
        #expect(slow4g.latency == .milliseconds(75) && slow4g.bandwidthDown?.bytesPerSecond == 204_800 && slow4g.bandwidthUp == .kilobits(750))
        #expect(fast3g.latency == .milliseconds(75) && fast3g.bandwidthDown == .kilobits(1600) && fast3g.bandwidthUp == .kilobits(768))
        #expect(ShapingSettings.combining([.link(slow4g)], direction: .downstream).loss == nil)
        let scenario = try Scenario.parse(
            yaml: """
                name: t
                duration: 10s
                proxies:
                  - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
                faults:
                  - link: {at: 1s, for: 2s, profile: 2g-rural}
                  - handoff: {at: 5s, from: slow-4g, to: fast-3g}

                """,
            file: "t.yaml"
        )
        #expect(scenario.faults.first?.parameters == .link(rural))
    }
}
