import ChaosCore

/// Follows the mobile path's events per connection, and each connection's longest quiet gap (no byte read either
/// way): the keepalive interval the pair really used. Memory is one small record per live connection, plus the
/// first ``PathSummary/connectionLimit`` records the path touched.
struct PathTracker {
    private struct Live {
        var lastByte: Int64
        var longestGap: Int64 = 0
        var record: PathConnectionRecord?
        var natExpiredAt: Int64?
        /// When its last audited message was sent, and the longest time between two (nil: none yet).
        var lastMessage: Int64?
        var longestMessageGap: Int64?

        /// The longest time without a message up to `time` (the quiet after the last one counts); nil: none sent.
        func messageGap(at time: Int64) -> Int64? {
            lastMessage.map { max(longestMessageGap ?? 0, time - $0) }
        }
    }

    private var live: [ConnectionID: Live] = [:]
    private var summary = PathSummary()
    private var noticed = LatencyRecorder()
    private var gaps = LatencyRecorder()
    /// Per connection that sent two messages or more: the longest time between two.
    private var messageGaps = LatencyRecorder()
    private var listed: [PathConnectionRecord] = []
    private var stoppedAt: Int64?
    /// The shortest NAT timeout the path's events showed (nanoseconds): a NAT added through the control API is
    /// not in the scenario's limits.
    private var seenNATTimeout: Int64?
    /// Whether anything is worth reporting (a path event, or limits to judge the keepalive against).
    private var seenPathEvent = false
    /// Whether connections are followed at all: once the run has limits or the path has spoken. Until then an audit
    /// (a capture's, a run with no mobile path) spends nothing per event here.
    var watching = false

    mutating func opened(_ id: ConnectionID, at time: Int64) {
        guard watching else { return }
        live[id] = Live(lastByte: time)
    }

    mutating func read(on id: ConnectionID, at time: Int64) {
        guard watching, var connection = live[id] else { return }
        connection.longestGap = max(connection.longestGap, time - connection.lastByte)
        connection.lastByte = time
        live[id] = connection
    }

    /// An audited message was sent on `id` (only followed under a radio: it tells keepalives from data).
    mutating func message(on id: ConnectionID, at time: Int64) {
        guard var connection = live[id] else { return }
        if let last = connection.lastMessage { connection.longestMessageGap = max(connection.longestMessageGap ?? 0, time - last) }
        connection.lastMessage = time
        live[id] = connection
    }

    mutating func path(_ event: TrafficEvent.PathEvent, on id: ConnectionID, at time: Int64) {
        // A flow's move is the QUIC path watch's (a datagram flow has no connection to follow), and what it cut the
        // audit's.
        switch event {
        case .rebound, .acknowledgementsCut, .deadPathSeen: return
        default: break
        }
        seenPathEvent = true
        watching = true
        var connection = live[id] ?? Live(lastByte: time)
        var record = connection.record ?? PathConnectionRecord(connection: id)
        switch event {
        case .radioPromotion(let waited):
            record.radioPromotions += 1
            record.radioPromotionS += Double(waited) / 1e9
            summary.radioPromotions += 1
            summary.radioPromotionS += Double(waited) / 1e9
        case .natExpired(let idleTimeout, let idleFor):
            seenNATTimeout = min(seenNATTimeout ?? .max, idleTimeout)
            let expired = time - idleFor
            connection.natExpiredAt = expired
            record.natExpiredAtS = Double(expired) / 1e9
            summary.natExpired += 1
        case .retransmission(_, let delay):
            record.retransmissions += 1
            record.retransmissionStallS += Double(delay) / 1e9
            summary.retransmissions += 1
            summary.retransmissionStallS += Double(delay) / 1e9
        case .rebound, .acknowledgementsCut, .deadPathSeen:
            break
        }
        connection.record = record
        live[id] = connection
    }

    /// The run began stopping its pair: closes from now on are not the pair noticing anything.
    mutating func stopping(at time: Int64) { stoppedAt = time }

    /// A leg of `id` closed (`how`); the first close after a NAT forgot it is the pair noticing, unless the proxy cut
    /// it or the run was stopping.
    mutating func closed(_ id: ConnectionID, how: TrafficEvent.CloseKind, at time: Int64, fully: Bool) {
        guard var connection = live[id] else { return }
        if let expired = connection.natExpiredAt, connection.record?.natNoticedAfterS == nil, !how.isFaultCut,
            stoppedAt.map({ time < $0 }) ?? true
        {
            connection.record?.natNoticedAfterS = Double(time - expired) / 1e9
            summary.natNoticed += 1
            noticed.record(nanoseconds: time - expired)
        }
        connection.natExpiredAt = connection.record?.natNoticedAfterS == nil ? connection.natExpiredAt : nil
        guard fully else {
            live[id] = connection
            return
        }
        live.removeValue(forKey: id)
        finish(connection, at: time)
    }

    private mutating func finish(_ connection: Live, at time: Int64) {
        // The gap up to its end counts too: a connection that died quiet was quiet that long.
        gaps.record(nanoseconds: max(connection.longestGap, time - connection.lastByte))
        if let gap = connection.messageGap(at: time) { messageGaps.record(nanoseconds: gap) }
        if let record = connection.record, listed.count < PathSummary.connectionLimit { listed.append(record) }
    }

    /// The summary at `time`, judged against `limits` (nil when there is nothing to say).
    func result(at time: Int64, limits: PathLimits?) -> PathSummary? {
        guard seenPathEvent || limits != nil else { return nil }
        var result = summary
        var gaps = self.gaps
        var messageGaps = self.messageGaps
        var listed = self.listed
        for (_, connection) in live.sorted(by: { $0.key < $1.key }) {
            gaps.record(nanoseconds: max(connection.longestGap, time - connection.lastByte))
            if let gap = connection.messageGap(at: time) { messageGaps.record(nanoseconds: gap) }
            if let record = connection.record, listed.count < PathSummary.connectionLimit { listed.append(record) }
        }
        result.connections = listed.sorted { $0.connection < $1.connection }
        result.natNoticedS = noticed.summary
        result.quietGapS = gaps.summary
        result.natIdleTimeoutS = (limits?.natIdleTimeout ?? seenNATTimeout).map { Double($0) / 1e9 }
        result.radioTailS = limits?.radioTail.map { Double($0) / 1e9 }
        result.messageGapS = messageGaps.summary
        result.findings = Self.findings(result)
        return result
    }

    /// What a user should change, judged from what the pair did.
    static func findings(_ path: PathSummary) -> [String] {
        var findings: [String] = []
        let keepalive = path.quietGapS.count > 0 ? path.quietGapS.max : nil
        if path.natExpired > 0, let timeout = path.natIdleTimeoutS {
            var line = "\(path.natExpired) connection(s) went quiet past the NAT's \(seconds(timeout)) idle timeout and died silently"
            if let keepalive { line += " (the pair's longest quiet gap: \(seconds(keepalive)))" }
            line +=
                path.natNoticed == 0
                ? "; the pair never noticed"
                : "; the pair noticed \(path.natNoticed) after \(seconds(path.natNoticedS.p50)) (p50), \(seconds(path.natNoticedS.max)) at most"
            findings.append(line + ": send a keepalive more often than every \(seconds(timeout)).")
        } else if let timeout = path.natIdleTimeoutS, let keepalive, keepalive >= timeout {
            findings.append(
                "the pair's longest quiet gap (\(seconds(keepalive))) reaches the NAT's \(seconds(timeout)) idle timeout: "
                    + "on a real network such a connection dies silently; send a keepalive more often."
            )
        }
        // Only a keepalive is held against the pair: messages that come more often than the tail keep a radio busy
        // on any phone, while a keepalive that does so between rarer messages only costs the battery.
        if let tail = path.radioTailS, let keepalive, keepalive < tail / 2, path.messageGapS.count > 0, path.messageGapS.p50 >= tail {
            findings.append(
                "the pair's keepalive never lets the radio idle: its longest quiet gap (\(seconds(keepalive))) is well under "
                    + "the radio's \(seconds(tail)) tail while its messages are \(seconds(path.messageGapS.p50)) apart (p50), so on a "
                    + "phone the radio stays connected for the keepalive alone (battery); send it less often unless a NAT forgets sooner."
            )
        }
        return findings
    }

    private static func seconds(_ value: Double) -> String {
        value >= 10 ? "\(Int(value.rounded())) s" : "\((value * 10).rounded() / 10) s"
    }
}
