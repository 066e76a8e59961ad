import ChaosCore

/// Packet loss as TCP under it looks to the application: a direction's bytes are cut into MSS-sized pieces, each
/// lost or not by a two-state Gilbert-Elliott model (a good state that loses nothing, a bad one that loses every
/// piece), and a lost piece arrives one retransmission timeout later (200 ms, doubling each time its retransmission
/// is lost again, with the mean rate, at most ``maximumRetransmissions`` times). Everything behind it waits (head-of-line blocking):
/// the bytes keep their order. Every draw comes from the connection's seeded generator.
package struct LossModel: Equatable, Sendable {
    /// The share of pieces lost, on average (0...0.99).
    package var rate: Double
    /// The mean number of pieces lost in a row (at least 1: 1 is independent losses).
    package var burst: Double

    /// The size of one piece: a common Ethernet-path MSS.
    package static let pieceBytes = 1_460
    /// IPv4 and TCP headers, without options: an MTU less this is the largest payload of one packet.
    package static let headerBytes = 40
    /// The first retransmission timeout, nanoseconds (Linux's and RFC 6298's floor for a short path).
    package static let initialTimeout: Int64 = 200_000_000
    /// The longest retransmission timeout, nanoseconds.
    package static let maximumTimeout: Int64 = 60_000_000_000
    /// After this many lost retransmissions of one piece, the next one arrives (a TCP would soon give up instead).
    package static let maximumRetransmissions = 8

    /// A model losing `rate` of pieces in bursts of `burst` on average.
    package init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// The chance a good state turns bad before a piece, and a bad one good.
    var transitions: (goodToBad: Double, badToGood: Double) {
        let badToGood = 1 / max(burst, 1)
        // In the long run the bad state holds `rate` of the pieces: p / (p + r) = rate.
        let goodToBad = rate >= 1 ? 1 : min(1, rate * badToGood / (1 - rate))
        return (goodToBad, badToGood)
    }
}

/// The state of one direction's loss model: whether the path is in its bad state, carried from piece to piece.
struct LossState {
    var bad = false

    /// Whether the next piece is lost, stepping the chain with `generator`.
    mutating func nextLost(_ model: LossModel, _ generator: inout SeededGenerator) -> Bool {
        let (goodToBad, badToGood) = model.transitions
        if bad {
            if Self.chance(badToGood, &generator) { bad = false }
        } else if Self.chance(goodToBad, &generator) {
            bad = true
        }
        return bad
    }

    /// How much later than a piece sent now it arrives: 0 when it is not lost, else the sum of the retransmission
    /// timeouts of its lost transmissions. The chain decides the first transmission (bursts are runs of pieces sent
    /// together); a retransmission goes a timeout later, long after the burst, and is lost with the mean `rate`.
    mutating func delay(_ model: LossModel, _ generator: inout SeededGenerator) -> Int64 {
        guard nextLost(model, &generator) else { return 0 }
        var delay = LossModel.initialTimeout
        var timeout = LossModel.initialTimeout
        var losses = 1
        while losses <= LossModel.maximumRetransmissions, Self.chance(model.rate, &generator) {
            timeout = min(timeout * 2, LossModel.maximumTimeout)
            delay += timeout
            losses += 1
        }
        return delay
    }

    private static func chance(_ probability: Double, _ generator: inout SeededGenerator) -> Bool {
        guard probability > 0 else { return false }
        guard probability < 1 else { return true }
        return generator.nextUnit() < probability
    }
}
