import ChaosCore
import ChaosDemo
import Testing

@Suite("Reliability building blocks (pure, no sockets)")
struct ReliabilityTests {
    @Test(
        "full-jitter backoff draws stay within [0, min(cap, base·2ⁿ)] for every attempt",
        arguments: [
            (0, 500), (1, 1_000), (2, 2_000), (3, 4_000), (5, 16_000), (6, 32_000), (7, 32_000), (40, 32_000), (200, 32_000),
        ]
    )
    func backoffBounds(failures: Int, ceilingMillis: Int64) {
        let policy = BackoffPolicy.standard
        #expect(policy.ceiling(afterFailures: failures) == .milliseconds(ceilingMillis))
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<500 {
            let delay = policy.delay(afterFailures: failures, using: &generator)
            #expect(delay >= .zero && delay <= .milliseconds(ceilingMillis))
        }
    }

    @Test("full jitter spreads draws over the whole window (mean near half the ceiling), deterministically per seed")
    func backoffSpreadAndDeterminism() {
        let policy = BackoffPolicy.standard
        var a = SeededGenerator(seed: 42)
        var b = SeededGenerator(seed: 42)
        let draws = (0..<4_000).map { _ in policy.delay(afterFailures: 0, using: &a) }
        let again = (0..<4_000).map { _ in policy.delay(afterFailures: 0, using: &b) }
        #expect(draws == again)
        let meanMillis = draws.map(\.seconds).reduce(0, +) / Double(draws.count) * 1000
        #expect(abs(meanMillis - 250) < 20)
        #expect(draws.contains { $0 < .milliseconds(25) } && draws.contains { $0 > .milliseconds(475) })
    }

    @Test("every retry, the first after a reset too, is drawn with full jitter (no herd); later ones back off; a success starts over")
    func reconnectSchedule() {
        var schedule = ReconnectSchedule(policy: .standard, generator: SeededGenerator(seed: 1))
        #expect(schedule.nextDelay(after: .reset) <= .milliseconds(500))
        let second = schedule.nextDelay(after: .connectFailed)
        #expect(second <= .seconds(Int64(1)))
        let third = schedule.nextDelay(after: .reset)
        #expect(third <= .seconds(Int64(2)))
        schedule.connectionSucceeded()
        #expect(schedule.failures == 0)
        #expect(schedule.nextDelay(after: .heartbeatTimeout) <= .milliseconds(500))
        // The first retry after a reset, for 100 clients with their own seeds: spread over the whole first window,
        // so that no 50 ms holds more than a few of them.
        let firsts = (0..<100).map { seed in
            var client = ReconnectSchedule(policy: .standard, generator: SeededGenerator(seed: UInt64(seed)))
            return client.nextDelay(after: .reset).nanoseconds
        }.sorted()
        #expect(firsts.allSatisfy { $0 <= 500_000_000 })
        #expect(firsts.first! < 50_000_000 && firsts.last! > 450_000_000)
        let densest = firsts.indices.map { low in firsts[low...].prefix { $0 - firsts[low] <= 50_000_000 }.count }.max()!
        #expect(densest <= 25, "at most a quarter of them in any 50 ms, found \(densest)")
    }

    @Test("the bounded send queue drops the oldest unacknowledged messages and reports them as a gap")
    func queueOverflow() {
        var queue = OutboundQueue(capacity: 3)
        for expected in 1...3 { #expect(queue.append() == (expected, nil)) }
        let fourth = queue.append()
        #expect(fourth.seq == 4 && fourth.dropped == 1...1)
        #expect(queue.unacknowledged == [2, 3, 4])
        queue.acknowledge(upTo: 3)
        #expect(queue.unacknowledged == [4])
        #expect(queue.append().dropped == nil)
    }

    @Test("a resume resends what the peer has not acknowledged, after a gap for what is no longer held")
    func queueResume() {
        var queue = OutboundQueue(capacity: 3)
        for _ in 1...6 { _ = queue.append() }  // 1...3 dropped, 4...6 held
        let resume = queue.resume(peerAck: 1)
        #expect(resume.gap == 2...3)
        #expect(resume.resend == [4, 5, 6])
        let caughtUp = queue.resume(peerAck: 5)
        #expect(caughtUp.gap == nil && caughtUp.resend == [6])
        var restored = OutboundQueue(capacity: 10, lastAssigned: 10)  // a restarted producer lost 1...10
        #expect(restored.append().seq == 11)
        let afterRestart = restored.resume(peerAck: 7)
        #expect(afterRestart.gap == 8...10 && afterRestart.resend == [11])
    }

    @Test("the consumer processes each seq once, drops duplicates and reports holes and gap markers")
    func sequencer() {
        var sequencer = InboundSequencer()
        #expect(sequencer.accept(1) == .process)
        #expect(sequencer.accept(2) == .process)
        #expect(sequencer.accept(2) == .duplicate)
        #expect(sequencer.accept(1) == .duplicate)
        #expect(sequencer.accept(5) == .processAfterHole(missing: 3...4))
        #expect(sequencer.skip(through: 4) == nil)
        #expect(sequencer.skip(through: 8) == 6...8)
        #expect(sequencer.lastProcessed == 8)
        var naive = InboundSequencer(deduplicates: false)
        #expect(naive.accept(3) == .processAfterHole(missing: 1...2))
        #expect(naive.accept(3) == .process)
    }

    @Test("wire messages round-trip through their NDJSON line with the keys the audit reads")
    func wireRoundTrip() throws {
        let message = WireMessage.data(stream: "c1", direction: "up", seq: 7)
        let line = message.encodedLine()
        #expect(line.last == UInt8(ascii: "\n"))
        let text = String(decoding: line.dropLast(), as: UTF8.self)
        #expect(text.contains(#""type":"MSG""#) && text.contains(#""seq":7"#) && text.contains(#""stream":"c1""#))
        #expect(WireMessage(line: line.dropLast()) == message)
        #expect(WireMessage(line: Array(#"{"type":"NOPE"}"#.utf8)) == nil)
    }

    @Test("addresses parse as HOST:PORT and bad ones are bad input", arguments: ["127.0.0.1:7001", "[::1]:80", "localhost:0"])
    func addresses(text: String) throws {
        #expect(try DemoAddress(parsing: text).description == text)
    }

    @Test("malformed addresses are rejected with a bad-input error", arguments: ["7001", "host:", ":80", "h:70000", "h:x"])
    func badAddresses(text: String) {
        #expect(throws: ChaosError.self) { try DemoAddress(parsing: text) }
    }
}
