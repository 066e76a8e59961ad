/// What one QUIC connection's path did (RFC 9000 §8.2, §9): each time an end saw its peer on a new path (a NAT
/// rebinding, a handoff to another network) it sends PATH_CHALLENGE there, and the connection lives on once the peer
/// answers with the same data in a PATH_RESPONSE. Each such change is an episode: answered, the connection migrated;
/// closed or never answered, it died on it. How long the streams stalled is the gap in the stream bytes the proxy
/// passed on (either way) across the change: from the last before the path died to the first after. The first
/// packets on the new path come before the challenge they provoke, so that gap is the longest of those that ended
/// shortly before the challenge (within ``newPathLead``, among the last ``recentGapLimit``), or, when none did, the one
/// that spans it.
///
/// A live proxy also says when it moved the flow itself (a `rebind`, a `handoff`: ``rebound()``): the client's next
/// packet is the first on the new path, and an episode begins there whether or not a challenge follows, so a server
/// that never validates the new path (one behind a load balancer that routes by address, which drops the packets) is
/// a connection that died on the change, not one whose path never changed. Such an episode is judged once the
/// connection's packets went on for ``decisionWindow`` after it began (a connection that went quiet at once says nothing).
struct QUICPathWatch {
    /// The most unanswered challenges remembered (an end sends a few per path, RFC 9000 §8.2.1).
    static let challengeLimit = 16
    /// How long before a challenge the first packets on the new path may have come (the proxy to the server and back).
    static let newPathLead: Int64 = 300_000_000
    /// The most recent gaps between deliveries remembered.
    static let recentGapLimit = 64
    /// How long packets must go on after an episode the proxy's move began before it is judged (about three of a
    /// loopback or LAN path's probe timeouts, and well under any QUIC idle timeout).
    static let decisionWindow: Int64 = 1_000_000_000

    /// Challenges not answered yet: their data, by the end that sent them.
    private var unanswered: [[UInt8]: QUICSender] = [:]
    /// Path changes seen (an episode begins at a challenge when none is waiting) and those answered.
    private(set) var episodes = 0
    private(set) var validated = 0
    /// When the episode still waiting for its answer began (nil: none waits).
    private var waitingSince: Int64?
    /// When the last episode began, until a stall across it is measured.
    private var unmeasuredEpisode: Int64?
    /// A CONNECTION_CLOSE either way, while an episode waited for its answer.
    private(set) var closedOnChange = false
    /// When stream bytes were last passed on (either way), and the latest gaps between deliveries (when each ended).
    private var lastDelivery: Int64?
    private var recentGaps: [(end: Int64, gap: Int64)] = []
    /// The longest gap in stream bytes passed on across an episode (nanoseconds).
    private(set) var longestStall: Int64 = 0
    /// The proxy moved the flow and the client has sent nothing since: its next packet begins an episode.
    private var reboundPending = false
    /// Whether the episode waiting began at the proxy's move (not at a challenge).
    private var waitingFromRebound = false
    /// When the last packet was read.
    private var lastRead: Int64 = 0

    /// The proxy moved the flow to a new upstream-facing socket (a `rebind`, a `handoff`).
    mutating func rebound() { reboundPending = true }

    /// A packet read from its sender at `time`.
    mutating func read(_ packet: QUICPacketRecord, at time: Int64) {
        lastRead = max(lastRead, time)
        if reboundPending, packet.sender == .client {
            // The first packet on the new path: the stall is the gap in deliveries that spans it.
            reboundPending = false
            if waitingSince == nil {
                episodes += 1
                waitingSince = time
                waitingFromRebound = true
                unmeasuredEpisode = time
            }
        }
        for frame in packet.frames {
            switch frame {
            case .pathChallenge(let data):
                if waitingSince == nil {
                    episodes += 1
                    waitingSince = time
                    waitingFromRebound = false
                    let ended = recentGaps.filter { time - $0.end <= Self.newPathLead }.map(\.gap).max()
                    if let ended {
                        // The new path's first packets were passed on just before: the stall ended there.
                        longestStall = max(longestStall, ended)
                    } else {
                        unmeasuredEpisode = time
                    }
                }
                if unanswered.count < Self.challengeLimit { unanswered[data] = packet.sender }
            case .pathResponse(let data):
                // An answer counts when it comes from the other end than the challenge's.
                guard let challenger = unanswered[data], challenger != packet.sender else { continue }
                unanswered.removeAll()
                if waitingSince != nil {
                    validated += 1
                    waitingSince = nil
                }
            case .connectionClose:
                if waitingSince != nil { closedOnChange = true }
            default:
                break
            }
        }
    }

    /// Stream bytes were passed on to an end at `time`.
    mutating func delivered(at time: Int64) {
        if let last = lastDelivery {
            recentGaps.append((time, time - last))
            if recentGaps.count > Self.recentGapLimit { recentGaps.removeFirst(recentGaps.count - Self.recentGapLimit) }
            if let episode = unmeasuredEpisode, episode >= last {
                longestStall = max(longestStall, time - last)
                unmeasuredEpisode = nil
            }
        }
        lastDelivery = time
    }

    /// The episodes judged: all but one the proxy's move began that still waits, when the connection's packets stopped
    /// within ``decisionWindow`` of its start.
    var judgedEpisodes: Int {
        guard let since = waitingSince, waitingFromRebound, lastRead - since < Self.decisionWindow else { return episodes }
        return episodes - 1
    }

    /// Whether its path changed, and then whether the connection migrated (every change answered, none closed on).
    var verdict: (changed: Bool, migrated: Bool) {
        let judged = judgedEpisodes
        return (judged > 0, judged > 0 && validated == judged && !closedOnChange)
    }
}

/// What QUIC connections' paths did, added up (``QUICPathWatch``): for the report's `extra`.
package struct QUICPathSummary: Hashable, Sendable {
    /// Connections whose path changed at least once (an end challenged a new path).
    package var changed = 0
    /// Of those, the ones that migrated: every change answered, and none closed while one waited.
    package var migrated = 0
    /// Path changes seen, and those answered (PATH_RESPONSE to the challenge).
    package var changes = 0
    package var validations = 0
    /// The longest the streams of a connection passed on nothing across a path change (nanoseconds; 0: none measured).
    package var longestStall: Int64 = 0

    /// Nothing seen yet.
    package init() {}

    /// The connections whose path changed and that did not migrate: closed on the change, or never answered.
    package var died: Int { changed - migrated }

    /// Adds one connection's watch.
    mutating func add(_ watch: QUICPathWatch) {
        let verdict = watch.verdict
        guard verdict.changed else { return }
        changed += 1
        if verdict.migrated { migrated += 1 }
        changes += watch.judgedEpisodes
        validations += watch.validated
        longestStall = max(longestStall, watch.longestStall)
    }

    /// `quic.paths_changed`, `quic.migrated`, `quic.died_on_path_change`, `quic.path_validations` (answered of
    /// challenged), `quic.migration_stall_s`, and `quic.finding` when a connection died on a change; empty when no path
    /// changed.
    package var facts: [String: String] {
        guard changed > 0 else { return [:] }
        var facts = [
            "quic.paths_changed": "\(changed)",
            "quic.migrated": "\(migrated)",
            "quic.died_on_path_change": "\(died)",
            "quic.path_validations": "\(validations) of \(changes)",
            "quic.migration_stall_s": "\(Double((longestStall + 500_000) / 1_000_000) / 1000)",
        ]
        if died > 0 {
            facts["quic.finding"] =
                "\(died) of \(changed) QUIC connection(s) died when their path changed (a rebinding or a handoff): "
                + "closed, or the new path never validated (its PATH_CHALLENGE unanswered, or none sent: the server dropped the packets "
                + "from the new address), where connection migration (RFC 9000 §9) carries a connection on"
        }
        return facts
    }
}
