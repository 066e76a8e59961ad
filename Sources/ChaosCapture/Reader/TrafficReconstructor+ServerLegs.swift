import ChaosCore

/// Pairing a server leg that has several candidate client legs by what it carried: a proxy forwards
/// bytes unchanged, so each way a server leg's first bytes equal its own client leg's first bytes.
extension TrafficReconstructor {
    /// Pairs every waiting server leg whose payload now tells its client leg, or (with `force`, or
    /// once it finished, its window passed or its payload cannot tell more) takes its best guess;
    /// then client legs that finished and that no server leg waits for any more are resolved.
    func settleServerLegs(time: Int64, force: Bool = false) throws {
        var decided = true
        while decided {
            decided = false
            for index in pendingServerLegs.indices where try decide(pendingServerLegs[index], time: time, force: force) {
                pendingServerLegs.remove(at: index)
                decided = true
                break
            }
        }
        for leg in pendingClientLegs where leg.finished && leg.isPending && !isClaimed(leg) {
            try resolveUnpaired(leg, time: time)
        }
    }

    /// Whether a waiting server leg may still take `flow` as its client leg.
    func isClaimed(_ flow: TCPFlow) -> Bool {
        pendingServerLegs.contains { waiting in waiting.flow === flow || waiting.candidates.contains { $0 === flow } }
    }

    /// Pairs (or, with no candidate left, makes standalone) `waiting` when its client leg is known or
    /// has to be guessed now; false when it keeps waiting.
    private func decide(_ waiting: PendingServerLeg, time: Int64, force: Bool) throws -> Bool {
        let leg = waiting.flow
        // Candidates still waiting: not taken by another server leg, not resolved on their own.
        let available = waiting.candidates.filter(\.isPending)
        guard let oldest = available.first else {
            try makeStandalone(leg, time: leg.firstTime)
            return true
        }
        let agreeing = available.filter { $0.firstBytes.agrees(with: leg.firstBytes) }
        let choice: TCPFlow?
        if available.count == 1 {
            choice = oldest
        } else if agreeing.count == 1 || agreeing.isEmpty {
            // One agrees: found. None agrees (the proxy changed bytes?): more payload will not help.
            choice = agreeing.first ?? oldest
        } else if force || leg.finished || leg.firstBytes.isExhausted(against: agreeing.map(\.firstBytes))
            || (time - leg.firstTime > activeWindow && (Self.told(leg, agreeing) || Self.holdsTooMuch(agreeing)))
        {
            choice = agreeing[0]
        } else {
            choice = nil
        }
        guard let choice else { return false }
        pendingClientLegs.removeAll { $0 === choice }
        try pair(choice, with: leg, time: leg.firstTime)
        return true
    }

    /// Whether the payload `leg` carried was compared with some of `candidates`' (in a direction both carried bytes):
    /// only then is the oldest of those that agree a guess from payload. A server leg that carried only its server's
    /// greeting, which the proxy holds from every client leg (a partition), waits for more, as one that carried
    /// nothing does (the gRPC pair's tcpdump, s68: two reconnects dialled crosswise in a partition, paired by the
    /// window's guess, their streams mixed).
    static func told(_ leg: TCPFlow, _ candidates: [TCPFlow]) -> Bool {
        leg.carriedPayload && candidates.contains { leg.firstBytes.overlaps($0.firstBytes) }
    }

    /// The most payload the candidates of a server leg that has carried nothing yet may hold before it is
    /// paired by guess: a proxy holding a new connection's first bytes (a partition) dials the server at once and
    /// writes them only when it lets them through, seconds later, and its dials can overtake each other, so the
    /// window alone would pair such legs crosswise.
    static let heldLimitWithoutPayload = 32 << 20

    /// Whether `candidates` hold more than ``heldLimitWithoutPayload`` bytes between them.
    static func holdsTooMuch(_ candidates: [TCPFlow]) -> Bool {
        candidates.reduce(0) { $0 + $1.heldBytes } > heldLimitWithoutPayload
    }
}
