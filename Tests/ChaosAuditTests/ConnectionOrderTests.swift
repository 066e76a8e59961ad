import ChaosAudit
import ChaosCore
import Testing

/// The audit's "newer connection" is the one opened later, whatever its number: a fleet's merge numbers each agent's
/// connections apart (agent k's from k × 1,000,000,000), so a stream that reconnects through agent 2, then 3, then 1,
/// then 2 again has its newest connection under a lower number than an older one.
@Suite("Connections are newer by their opening, not their number")
struct ConnectionOrderTests {
    /// A stream's four connections, numbered `ids` in the order they open (the netns fleet's p1-83 in a run starved to
    /// 0.4 of a CPU: seq 2 was resent on the fourth connection, acknowledged by the phone's TCP and logged by the phone,
    /// then the phone stopped; the merged audit counted it lost). The first carries seq 1; the third's consumer closes
    /// it before seq 2, resent there, reaches it (its socket answers with a reset); the fourth delivers seq 2.
    static func reconnectingStream(_ ids: [ConnectionID]) -> TrafficScript {
        var s = TrafficScript()
        s.opens(ids[0], at: 0.6, consumerAck: 0)
        s.relay(ids[0], [1])
        s.consumerAcks(ids[0], upTo: 1)
        s.faultResets(ids[0], at: 6.9)
        s.opens(ids[1], at: 7.4, consumerAck: 1)
        s.faultResets(ids[1], at: 12.4)
        s.opens(ids[2], at: 14.9, consumerAck: 1)
        s.at(23.5)
        s.add(ids[2], .closed(.client, .fin))
        s.at(23.7)
        s.send(ids[2], [2])
        s.write(ids[2], [2])
        s.add(ids[2], .closed(.client, .reset))
        s.add(ids[2], .closed(.server, .reset))
        s.opens(ids[3], at: 23.8, consumerAck: 1)
        s.at(23.9)
        s.relay(ids[3], [2])
        s.at(24)
        s.add(ids[3], .closed(.client, .fin))
        s.at(24.2)
        s.add(ids[3], .closed(.server, .fin))
        return s
    }

    @Test("numbered in opening order or as a fleet's merge numbers them, the delivery on the newest connection counts: ok 2, lost 0")
    func newestByOpening() throws {
        let agent: ConnectionID = 1_000_000_000  // FleetMerge.connectionStride: agent k's connections from k × this
        for ids: [ConnectionID] in [[1, 2, 3, 4], [agent + 20, 2 * agent + 110, 236, agent + 246]] {
            let result = try TrafficScript.auditWithAcks(Self.reconnectingStream(ids))
            #expect(result.totals.ok == 2 && result.totals.lost == 0 && result.totals.unconfirmed == 0, "\(ids): \(result.totals)")
        }
    }
}

extension TrafficScript {
    /// Connection `id` opens at `seconds` and its consumer states `consumerAck` there first (its resume point).
    fileprivate mutating func opens(_ id: ConnectionID, at seconds: Double, consumerAck: Int) {
        at(seconds)
        open(id)
        consumerAcks(id, upTo: consumerAck)
    }

    /// A fault resets both legs of connection `id` at `seconds`.
    fileprivate mutating func faultResets(_ id: ConnectionID, at seconds: Double) {
        at(seconds)
        add(id, .closed(.client, .resetByFault))
        add(id, .closed(.server, .resetByFault))
    }
}
