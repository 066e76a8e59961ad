import Testing

@testable import ChaosTLSDecryption

/// A QUIC connection's path changes as the packets show them (RFC 9000 §8.2, §9): a challenge answered is a migration,
/// one never answered or closed on is a death, and the stall is the gap in stream bytes passed on across the change.
@Suite("QUIC path watch: migrations, deaths and stalls")
struct QUICPathWatchTests {
    static func packet(_ sender: QUICSender, _ frames: [QUICFrame]) -> QUICPacketRecord {
        QUICPacketRecord(sender: sender, type: .oneRTT, number: 0, frames: frames, size: 1200)
    }

    static let seconds: Int64 = 1_000_000_000
    static let challenge: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]

    @Test("a server's challenge on the new path, answered by the client: migrated; the stall runs from the last bytes before to the first after")
    func answeredChallengeMigrates() {
        var watch = QUICPathWatch()
        watch.delivered(at: 1 * Self.seconds)
        watch.delivered(at: 2 * Self.seconds)
        // Blackout from 2 s; the server sees the client's new address at 5 s.
        watch.read(Self.packet(.server, [.pathChallenge(Self.challenge), .ack(ranges: [0...3], delay: 0, ecn: nil)]), at: 5 * Self.seconds)
        // A second challenge of the same change (a retransmitted probe) begins no new episode.
        watch.read(Self.packet(.server, [.pathChallenge([9, 9, 9, 9, 9, 9, 9, 9])]), at: 5 * Self.seconds + 1000)
        watch.read(Self.packet(.client, [.pathResponse(Self.challenge)]), at: 5 * Self.seconds + 10_000_000)
        watch.delivered(at: 5 * Self.seconds + 100_000_000)
        watch.delivered(at: 6 * Self.seconds)
        #expect(watch.episodes == 1 && watch.validated == 1)
        #expect(watch.verdict == (changed: true, migrated: true))
        #expect(watch.longestStall == 3 * Self.seconds + 100_000_000, "from 2 s to 5.1 s")

        var summary = QUICPathSummary()
        summary.add(watch)
        summary.add(QUICPathWatch())  // a connection whose path never changed is not counted
        #expect(summary.changed == 1 && summary.migrated == 1 && summary.died == 0)
        #expect(summary.facts["quic.migration_stall_s"] == "3.1")
        #expect(summary.facts["quic.path_validations"] == "1 of 1")
        #expect(summary.facts["quic.finding"] == nil)
    }

    @Test("as packets come: the new path's first bytes are passed on just before the challenge they provoke; the stall is the gap that ended there")
    func stallEndsBeforeTheChallenge() {
        var watch = QUICPathWatch()
        let ms: Int64 = 1_000_000
        for time in stride(from: 1000 * ms, through: 1100 * ms, by: Int(20 * ms)) { watch.delivered(at: time) }
        // A 500 ms blackout, then the client's retransmissions reach the server from its new address, which challenges it.
        watch.delivered(at: 1600 * ms)
        watch.read(Self.packet(.server, [.pathChallenge(Self.challenge)]), at: 1610 * ms)
        watch.delivered(at: 1615 * ms)
        watch.read(Self.packet(.client, [.pathResponse(Self.challenge)]), at: 1620 * ms)
        watch.delivered(at: 1630 * ms)
        #expect(watch.longestStall == 500 * ms, "\(watch.longestStall)")
        #expect(watch.verdict == (changed: true, migrated: true))
    }

    @Test(
        "a challenge never answered, or a close while one waits, is a connection that died on its path change; a response from the challenger itself answers nothing"
    )
    func unansweredChallengeDies() {
        var silent = QUICPathWatch()
        silent.read(Self.packet(.server, [.pathChallenge(Self.challenge)]), at: Self.seconds)
        silent.read(Self.packet(.server, [.pathResponse(Self.challenge)]), at: 2 * Self.seconds)
        #expect(silent.verdict == (changed: true, migrated: false))

        var closed = QUICPathWatch()
        closed.read(Self.packet(.server, [.pathChallenge(Self.challenge)]), at: Self.seconds)
        closed.read(Self.packet(.server, [.connectionClose(code: 0, frameType: nil, reason: [], application: false)]), at: 2 * Self.seconds)
        closed.read(Self.packet(.client, [.pathResponse(Self.challenge)]), at: 3 * Self.seconds)
        #expect(closed.closedOnChange && closed.verdict == (changed: true, migrated: false))

        // Two changes, the second never answered: the connection did not migrate.
        var twice = QUICPathWatch()
        twice.read(Self.packet(.server, [.pathChallenge(Self.challenge)]), at: Self.seconds)
        twice.read(Self.packet(.client, [.pathResponse(Self.challenge)]), at: 2 * Self.seconds)
        twice.read(Self.packet(.server, [.pathChallenge([7, 7, 7, 7, 7, 7, 7, 7])]), at: 3 * Self.seconds)
        #expect(twice.episodes == 2 && twice.validated == 1 && !twice.verdict.migrated)

        var summary = QUICPathSummary()
        for watch in [silent, closed, twice] { summary.add(watch) }
        #expect(summary.changed == 3 && summary.died == 3)
        #expect(summary.facts["quic.died_on_path_change"] == "3")
        #expect(summary.facts["quic.finding"]?.hasPrefix("3 of 3 QUIC connection(s) died when their path changed") == true)
        #expect(QUICPathSummary().facts.isEmpty, "nothing to say when no path changed")
    }

    @Test(
        "the proxy's own move begins an episode at the client's next packet: validated, a migration; never challenged while the client went on sending, a death; a connection that went quiet at once, undecided"
    )
    func reboundEpisodes() {
        let ms: Int64 = 1_000_000
        let data = Self.packet(.client, [.stream(id: 0, offset: 0, data: [1], fin: false)])
        // Validated: the server challenges the client's new address, the client answers.
        var migrated = QUICPathWatch()
        migrated.delivered(at: 900 * ms)
        migrated.rebound()
        migrated.read(Self.packet(.server, [.ack(ranges: [0...1], delay: 0, ecn: nil)]), at: 950 * ms)  // the server's, not the new path's
        migrated.read(data, at: 1000 * ms)
        migrated.delivered(at: 1010 * ms)
        migrated.read(Self.packet(.server, [.pathChallenge(Self.challenge)]), at: 1020 * ms)
        migrated.read(Self.packet(.client, [.pathResponse(Self.challenge)]), at: 1030 * ms)
        #expect(migrated.episodes == 1 && migrated.validated == 1, "the challenge joins the episode the move began")
        #expect(migrated.verdict == (changed: true, migrated: true))
        #expect(migrated.longestStall == 110 * ms, "the gap across the new path's first packet")

        // Never challenged: the server dropped the packets from the new address; the client sent on until its idle timeout.
        var dropped = QUICPathWatch()
        dropped.rebound()
        for time in stride(from: 1000 * ms, through: 3000 * ms, by: Int(100 * ms)) { dropped.read(data, at: time) }
        #expect(dropped.verdict == (changed: true, migrated: false))

        // Moved, then nothing more for long: undecided, not judged.
        var quiet = QUICPathWatch()
        quiet.rebound()
        quiet.read(data, at: 1000 * ms)
        quiet.read(data, at: 1200 * ms)
        #expect(quiet.episodes == 1 && quiet.judgedEpisodes == 0 && quiet.verdict == (changed: false, migrated: false))
        // Moved with no packet after: no episode at all.
        var idle = QUICPathWatch()
        idle.rebound()
        idle.read(Self.packet(.server, [.ack(ranges: [0...1], delay: 0, ecn: nil)]), at: 5000 * ms)
        #expect(idle.episodes == 0)

        var summary = QUICPathSummary()
        for watch in [migrated, dropped, quiet, idle] { summary.add(watch) }
        #expect(summary.changed == 2 && summary.migrated == 1 && summary.died == 1)
        #expect(summary.facts["quic.path_validations"] == "1 of 2")
        #expect(summary.facts["quic.finding"]?.contains("none sent: the server dropped the packets from the new address") == true)
    }
}
