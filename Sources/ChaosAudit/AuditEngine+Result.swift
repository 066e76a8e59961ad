import ChaosCore

extension AuditEngine {
    /// Builds the result; `final` counts seqs still in flight as lost and lists lost ranges as anomalies.
    /// The delivery totals so far, without building the whole result (for a progress line every second).
    package func totalsSoFar() -> DeliveryCounts {
        var totals = DeliveryCounts()
        for ledger in ledgers { totals.add(ledger.result(final: false).counts) }
        totals.updateRatio()
        return totals
    }

    func result(final: Bool) -> AuditResult {
        var totals = DeliveryCounts()
        var streams: [StreamResult] = []
        var anomalyList = anomalies.kept
        var anomalyCounts = anomalies.countsByName
        for ledger in ledgers {
            let result = ledger.result(final: final)
            streams.append(result)
            totals.add(result.counts)
            guard final, result.counts.lost > 0 else { continue }
            let room = max(0, Self.anomalyLimit - anomalyList.count)
            let ranges = ledger.lostRanges(final: true, limit: max(room, 1))
            anomalyCounts[Anomaly.Class.lost.rawValue, default: 0] += Int64(ranges.count)
            for range in ranges.prefix(room) {
                anomalyList.append(
                    Anomaly(
                        kind: .lost,
                        stream: ledger.name,
                        direction: ledger.direction,
                        fromSeq: range.lower,
                        toSeq: range.upper,
                        atS: Double(now) / 1e9,
                        connection: 0,
                        detail: "\(range.count) seq\(range.count == 1 ? "" : "s") never delivered"
                    )
                )
            }
        }
        totals.updateRatio()
        streams.sort { ($0.stream, $0.direction.rawValue) < ($1.stream, $1.direction.rawValue) }
        var (recoverySummary, impacts) = recovery.summary(at: now, final: final)
        recoverySummary.transitS = transit.summary
        var events = protocolStats
        if pingRoundTrips.count > 0 { events.pingRoundTripS = pingRoundTrips.summary }
        return AuditResult(
            complete: final,
            elapsedS: Double(now) / 1e9,
            totals: totals,
            streams: streams,
            anomalies: anomalyList,
            anomalyCounts: anomalyCounts,
            recovery: recoverySummary,
            faults: impacts,
            connections: connectionStats,
            messages: messageStats,
            activity: activity,
            protocolEvents: events.isEmpty ? nil : events,
            path: pathTracker.result(at: now, limits: pathLimits)
        )
    }
}
