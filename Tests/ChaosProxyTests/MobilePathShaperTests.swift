import ChaosCore
import NIOCore
import Testing

@testable import ChaosProxy

/// The radio's RRC states and the carrier NAT in virtual time: a ``Shaper`` per direction sharing a
/// ``ConnectionPath``, times in nanoseconds handed in by the test.
@Suite("Radio and NAT in virtual time")
struct MobilePathShaperTests {
    static let ms: Int64 = 1_000_000
    static let radio = RadioModel(promotion: .milliseconds(260), tail: .milliseconds(11_500))

    /// A connection's two directions on one path; `events` keeps what the path reported.
    final class Connection {
        var up: Shaper, down: Shaper
        let path: ConnectionPath
        var events: [TrafficEvent.PathEvent] = []

        init(radio: RadioClock = RadioClock(), settings: ShapingSettings, at now: Int64 = 0) {
            path = ConnectionPath(proxyRadio: radio)
            up = Shaper(generator: SeededGenerator(seed: 1))
            down = Shaper(generator: SeededGenerator(seed: 2))
            up.path = path
            down.path = path
            down.direction = .downstream
            up.update(settings, now: now)
            down.update(settings, now: now)
            path.onEvent = { [unowned self] _, event in events.append(event) }
        }

        /// Sends `count` bytes `direction` at `now`; returns when they leave (nil: never, before `horizon`).
        func send(_ direction: Direction = .upstream, bytes count: Int = 10, at now: Int64, horizon: Int64 = 600_000 * ms) -> Int64? {
            var shaper = direction == .upstream ? up : down
            defer { if direction == .upstream { up = shaper } else { down = shaper } }
            shaper.enqueue(.data(ByteBuffer(repeating: 1, count: count)), now: now)
            var clock = now
            while clock <= horizon {
                switch shaper.next(now: clock) {
                case .emit: return clock
                case .wait(let until): clock = until
                case .idle: return nil
                }
            }
            return nil
        }
    }

    @Test("the radio's promotion delays the first byte after an idle tail, either way, and no byte while a keepalive shorter than the tail runs")
    func promotionOnlyAfterTheTail() {
        let settings = ShapingSettings(radio: Self.radio)
        let connection = Connection(settings: settings)
        #expect(connection.send(at: 0) == 0, "a radio first watched is taken as connected")
        #expect(connection.send(.downstream, at: 5_000 * Self.ms) == 5_000 * Self.ms)
        // 11.5 s of quiet: the radio idles; the next byte (downstream here) waits 260 ms, and so does one upstream
        // during that promotion.
        let idle: Int64 = 20_000 * Self.ms
        #expect(connection.send(.downstream, at: idle) == idle + 260 * Self.ms)
        #expect(connection.send(at: idle + 100 * Self.ms) == idle + 260 * Self.ms)
        #expect(connection.events == [.radioPromotion(waited: 260 * Self.ms)])
        // A keepalive every 10 s (shorter than the tail) keeps it connected: no byte ever waits.
        for beat in 1...30 {
            let at = idle + Int64(beat) * 10_000 * Self.ms
            #expect(connection.send(at: at) == at)
        }
        #expect(connection.events.count == 1)
    }

    @Test("one radio per proxy: a byte on any connection keeps it connected for all; per: connection keeps them apart")
    func oneRadioPerProxy() {
        let shared = RadioClock()
        let a = Connection(radio: shared, settings: ShapingSettings(radio: Self.radio))
        let b = Connection(radio: shared, settings: ShapingSettings(radio: Self.radio))
        #expect(a.send(at: 0) == 0)
        for second in stride(from: Int64(10), through: 60, by: 10) { #expect(b.send(at: second * 1_000 * Self.ms) != nil) }
        #expect(a.send(at: 61_000 * Self.ms) == 61_000 * Self.ms, "b's bytes kept the phone's radio connected")
        var own = Self.radio
        own.perConnection = true
        let c = Connection(radio: shared, settings: ShapingSettings(radio: own))
        let d = Connection(radio: shared, settings: ShapingSettings(radio: own))
        #expect(c.send(at: 0) == 0)
        for second in stride(from: Int64(10), through: 60, by: 10) { #expect(d.send(at: second * 1_000 * Self.ms) != nil) }
        #expect(c.send(at: 61_000 * Self.ms) == 61_260 * Self.ms, "c's own radio idled")
        #expect(c.events == [.radioPromotion(waited: 260 * Self.ms)] && d.events.isEmpty)
    }

    @Test(
        "a NAT forgets a connection idle for its timeout: nothing passes either way from then on, even after the fault; a keepalive shorter than the timeout keeps it"
    )
    func natForgetsIdleConnections() {
        let timeout: Int64 = 30_000 * Self.ms
        let settings = ShapingSettings(natIdleTimeout: timeout)
        let kept = Connection(settings: settings)
        for beat in 0...20 {
            let at = Int64(beat) * 20_000 * Self.ms
            #expect(kept.send(beat % 2 == 0 ? .upstream : .downstream, at: at) == at, "a keepalive every 20 s")
        }
        #expect(kept.events.isEmpty)

        let dead = Connection(settings: settings)
        #expect(dead.send(at: 10_000 * Self.ms) == 10_000 * Self.ms)
        // 35 s of quiet: the mapping expired at 40 s; the next byte either way meets a dead connection.
        #expect(dead.send(.downstream, at: 45_000 * Self.ms) == nil)
        #expect(dead.send(.upstream, at: 46_000 * Self.ms) == nil)
        #expect(dead.events == [.natExpired(idleTimeout: timeout, idleFor: 5_000 * Self.ms)])
        #expect(dead.path.natExpiredAt == 40_000 * Self.ms)
        // The fault ends: the connection stays dead (no shaping left, yet nothing passes).
        dead.up.update(.none, now: 50_000 * Self.ms)
        dead.down.update(.none, now: 50_000 * Self.ms)
        #expect(!dead.up.isPassThrough)
        #expect(dead.send(at: 51_000 * Self.ms) == nil)
        #expect(dead.up.heldBytes == 20, "held (bounded by the shaper's high water), never passed on")
        // A new connection starts afresh.
        let fresh = Connection(settings: settings, at: 60_000 * Self.ms)
        #expect(fresh.send(at: 61_000 * Self.ms) == 61_000 * Self.ms)
    }

    @Test("the profiles carry their radio and NAT: lte and 3g a radio, cgnat a 5-minute NAT; combining keeps the slowest radio and the shortest NAT")
    func profilesCarryRadioAndNAT() {
        let lte = ShapingSettings.combining([.link(LinkProfile.named("lte")!)], direction: .upstream)
        #expect(lte.radio == .lte)
        let umts = ShapingSettings.combining([.link(LinkProfile.named("3g")!), .radio(.lte)], direction: .downstream)
        #expect(umts.radio == .umts)
        let nat = ShapingSettings.combining([.link(LinkProfile.named("cgnat")!), .nat(idleTimeout: .seconds(Int64(60)))], direction: .upstream)
        #expect(nat.natIdleTimeout == 60_000 * Self.ms)
        #expect(ShapingSettings.combining([.link(LinkProfile.named("cgnat")!)], direction: .upstream).natIdleTimeout == 300_000 * Self.ms)
    }

    @Test("each lost piece is reported as a retransmission stall with its delay, as many as the model lost (exact from the seed)")
    func retransmissionsAreReported() {
        let connection = Connection(settings: ShapingSettings(loss: LossModel(rate: 0.02, burst: 1)))
        var delays: [Int64] = []
        connection.path.onEvent = { _, event in
            if case .retransmission(.upstream, let delay) = event { delays.append(delay) }
        }
        // 2,000 pieces of 1,460 bytes, one write each, 10 ms apart.
        for piece in 0..<2_000 { _ = connection.send(bytes: 1460, at: Int64(piece) * 10 * Self.ms) }
        // About 2 % lost (a seeded draw: the same count every run).
        #expect((20...60).contains(delays.count), "\(delays.count) lost")
        #expect(delays.allSatisfy { $0 >= 200 * Self.ms })
        let again = Connection(settings: ShapingSettings(loss: LossModel(rate: 0.02, burst: 1)))
        var repeated = 0
        again.path.onEvent = { _, _ in repeated += 1 }
        for piece in 0..<2_000 { _ = again.send(bytes: 1460, at: Int64(piece) * 10 * Self.ms) }
        #expect(repeated == delays.count)
    }
}
