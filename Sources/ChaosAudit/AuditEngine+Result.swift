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
            // A receiver's copy that carried no message is no copy: acknowledgements of a sender's own stream travel
            // to it on the same connection (a chat server's ack), and its own messages are not owed to it.
            if ledger.receiver != nil, ledger.counts.sent == 0, ledger.counts.delivered == 0 { continue }
            // A receiver's copy of a stream that fans out is owed what its producer sent (to its end), and where each
            // lost seq died is judged against the producer's stream.
            let producer =
                ledger.receiver == nil ? nil : ledgerIndex[StreamKey(name: ledger.name, direction: ledger.direction.reversed)].map { ledgers[$0] }
            let owedThrough = producer.map { max($0.highestSent, $0.deliveredSeqs.max ?? $0.highestSent) }
            var result = ledger.result(final: final, owedThrough: owedThrough)
            // A receiver that got none of a stream's messages is owed them on the producer's terms.
            if result.contract == nil { result.contract = producer?.contract }
            guard final, result.counts.lost > 0 else {
                streams.append(result)
                totals.add(result.counts)
                continue
            }
            if ledger.receiver != nil {
                result.lostWhere = ledger.placement(of: ledger.lostRanges(final: true, limit: .max, owedThrough: owedThrough), producer: producer)
            }
            streams.append(result)
            totals.add(result.counts)
            let room = max(0, Self.anomalyLimit - anomalyList.count)
            let ranges = ledger.lostRanges(final: true, limit: max(room, 1), owedThrough: owedThrough)
            anomalyCounts[Anomaly.Class.lost.rawValue, default: 0] += Int64(ranges.count)
            for range in ranges.prefix(room) {
                var detail = "\(range.count) seq\(range.count == 1 ? "" : "s") never delivered"
                if ledger.receiver != nil { detail += " (\(ledger.placement(of: [range], producer: producer).sentence))" }
                var anomaly = Anomaly(
                    kind: .lost,
                    stream: ledger.name,
                    direction: ledger.direction,
                    fromSeq: range.lower,
                    toSeq: range.upper,
                    atS: Double(now) / 1e9,
                    connection: 0,
                    detail: detail
                )
                anomaly.receiver = ledger.receiver
                anomalyList.append(anomaly)
            }
        }
        totals.updateRatio()
        streams.sort { ($0.stream, $0.direction.rawValue, $0.receiver ?? "") < ($1.stream, $1.direction.rawValue, $1.receiver ?? "") }
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
