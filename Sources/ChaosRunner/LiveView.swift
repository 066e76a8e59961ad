import ChaosAudit
import ChaosControl
import ChaosCore
import ChaosProxy
import ChaosReport
import Foundation
import Synchronization

/// The live page's figures for a running run (``ControlAPI/Extras/liveState``, ``ControlAPI/Extras/liveStreams``),
/// made from the report so far: the verdict so far and why, the totals, connections, recovery percentiles, the fault
/// timeline as it unfolds (the last occurrences and the next ones), the first failure with the faults before it, the
/// worst streams, and what people did. One report is made at most once a second, whatever the number of pages open,
/// and the streams are sorted worst first once per report, so that a fleet's 50,000 streams page quickly.
final class LiveView: Sendable {
    /// The report so far.
    let report: @Sendable () -> RunReport
    let injector: FaultInjector
    let proxies: [ProxyServer]
    let manual: ManualActions
    let peers: [String]
    private let made = Mutex<(at: UInt64, report: RunReport, worst: [StreamResult])?>(nil)

    /// How old a report the page may show: 0.9 s by default.
    let freshFor: UInt64
    /// Streams per page, and how many of the worst the pushed figures carry.
    static let page = 100
    static let worstPushed = 10
    /// How many past occurrences and next ones the figures carry.
    static let recentFaults = 20
    static let nextFaults = 5

    init(
        report: @escaping @Sendable () -> RunReport,
        injector: FaultInjector,
        proxies: [ProxyServer],
        manual: ManualActions,
        peers: [String],
        freshFor: UInt64 = 900_000_000
    ) {
        self.report = report
        self.freshFor = freshFor
        self.injector = injector
        self.proxies = proxies
        self.manual = manual
        self.peers = peers
    }

    /// The report so far and its streams worst first: one made less than ``freshFor`` ago, or a new one.
    func current() -> (report: RunReport, worst: [StreamResult]) {
        let now = DispatchTime.now().uptimeNanoseconds
        if let made = made.withLock({ $0 }), now - made.at < freshFor { return (made.report, made.worst) }
        let report = report()
        let worst = HTMLRenderer.worstFirst(report.streams)
        made.withLock { $0 = (now, report, worst) }
        return (report, worst)
    }

    /// `GET /ui/state`: the figures, as one line of JSON.
    func state() -> String {
        let (report, worst) = current()
        let schedule = injector.schedule
        var state: [String: Any] = [
            "scenario": report.scenario,
            "seed": "\(report.seed)",
            "elapsed_s": report.elapsedS,
            "planned_s": report.plannedS ?? 0,
            "verdict": report.verdict.rawValue,
            "totals": Self.counts(report.totals),
            "connections": [
                "opened": report.connections.opened, "cut": report.connections.cutByFault, "refused": report.connections.refused,
                "live": proxies.map { $0.liveConnections.count }.reduce(0, +),
            ],
            "recovery": [
                "reconnect_p50_s": report.recovery.reconnectS.p50, "reconnect_p99_s": report.recovery.reconnectS.p99,
                "resume_p50_s": report.recovery.resumeS.p50, "resume_p99_s": report.recovery.resumeS.p99,
                "reconnects": report.recovery.reconnectS.count, "never_resumed": report.recovery.neverResumed,
            ],
            "faults": [
                "applied": report.faults.count,
                "recent": report.faults.suffix(Self.recentFaults).map(Self.fault),
                "next": injector.upcoming(Self.nextFaults).map { next -> [String: Any] in
                    var entry: [String: Any] = [
                        "kind": next.occurrence.kind.rawValue, "for_s": next.occurrence.lasts.seconds,
                        "summary": next.occurrence.effect.summary,
                    ]
                    if let begins = next.begins { entry["at_s"] = (begins + .nanoseconds(injector.timelineOrigin)).seconds }
                    if let proxy = next.occurrence.proxy { entry["proxy"] = proxy }
                    return entry
                },
            ],
            "paused": schedule?.isPausedByHand ?? false,
            "pauses_planned": schedule?.planned ?? false,
            "paused_total_s": schedule.map { $0.pauses(through: $0.now).total.seconds } ?? 0,
            "streams": ["count": report.streams.count, "worst": worst.prefix(Self.worstPushed).map(Self.row)],
            "manual": manual.all.map { action -> [String: Any] in
                ["at_s": action.atS, "action": action.action.rawValue, "detail": action.detail ?? ""]
            },
            "peers": peers,
        ]
        if let reason = report.verdictReason { state["verdict_reason"] = reason }
        if let inconclusive = report.inconclusive { state["inconclusive"] = inconclusive }
        if let failure = report.failures?.first {
            let byIndex = Dictionary(report.faults.map { ($0.occurrence, $0) }, uniquingKeysWith: { first, _ in first })
            state["first_failure"] = [
                "kind": failure.kind, "at_s": failure.atS, "account": failure.account, "stream": failure.stream ?? "",
                "faults": failure.faults.compactMap { byIndex[$0] }.map(Self.fault),
            ]
        }
        return Self.json(state)
    }

    /// `GET /ui/streams`: page `page` of the streams (worst first) whose names contain `search`, as JSON.
    func streams(page: Int, search: String) -> String {
        let (_, worst) = current()
        let needle = search.lowercased()
        let matching = needle.isEmpty ? worst : worst.filter { Self.name($0).lowercased().contains(needle) }
        let pages = max(1, (matching.count + Self.page - 1) / Self.page)
        let rows = matching.dropFirst(min(page, pages - 1) * Self.page).prefix(Self.page).map(Self.row)
        return Self.json([
            "page": min(page, pages - 1), "pages": pages, "count": worst.count, "matching": matching.count, "rows": Array(rows),
        ])
    }

    static func name(_ stream: StreamResult) -> String {
        stream.receiver.map { "\(stream.stream) to \($0)" } ?? stream.stream
    }

    static func row(_ stream: StreamResult) -> [String: Any] {
        var row = counts(stream.counts)
        row["stream"] = name(stream)
        row["direction"] = stream.direction.rawValue
        return row
    }

    static func counts(_ c: DeliveryCounts) -> [String: Any] {
        [
            "sent": c.sent, "delivered": c.delivered, "ok": c.ok, "lost": c.lost, "recovered": c.recovered,
            "duplicated": c.duplicated, "redelivered": c.redelivered, "reordered": c.reordered, "gaps": c.gaps,
            "unacked": c.unacked, "delivery": c.deliveryRatio,
        ]
    }

    static func fault(_ fault: FaultRecord) -> [String: Any] {
        var entry: [String: Any] = [
            "kind": fault.kind, "occurrence": fault.occurrence, "at_s": fault.atS, "for_s": fault.forS,
            "connections": fault.connections,
            "summary": fault.detail.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "),
        ]
        if let proxy = fault.proxy { entry["proxy"] = proxy }
        return entry
    }

    /// One line of JSON (`<` escaped, so that it may sit in a page).
    static func json(_ value: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }
}
