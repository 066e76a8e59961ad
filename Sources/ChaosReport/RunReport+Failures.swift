import ChaosAudit
package import ChaosCore

/// One failure of the pair, tied to the fault occurrences before it (`failures[]` in report.json, PRODUCT §13).
package struct FailureRecord: Sendable, Codable, Equatable {
    /// `lost`, `duplicated`, `reordered`, `never_resumed` or `half_open_unnoticed`.
    package var kind: String
    /// The logical stream (nil for a fault's whole effect).
    package var stream: String?
    /// Which way its messages travel.
    package var direction: Direction?
    /// The receiver whose copy of the stream it concerns (a subscriber's client id), if the stream has several.
    package var receiver: String?
    /// The first seq concerned.
    package var fromSeq: Int64?
    /// The last seq concerned.
    package var toSeq: Int64?
    /// When it was seen, in seconds since the start of the run (for a loss: when the gap showed, or the run's end for
    /// messages never followed by another).
    package var atS: Double
    /// The connection it was seen on (nil: not bound to one).
    package var connection: UInt64?
    /// The fault occurrences (indices into `timeline.json`) in the window before it, oldest first.
    package var faults: [Int]
    /// The failure in one sentence.
    package var account: String

    /// Creates a failure.
    package init(
        kind: String,
        stream: String? = nil,
        direction: Direction? = nil,
        fromSeq: Int64? = nil,
        toSeq: Int64? = nil,
        atS: Double,
        connection: UInt64? = nil,
        faults: [Int],
        account: String
    ) {
        self.kind = kind
        self.stream = stream
        self.direction = direction
        self.fromSeq = fromSeq
        self.toSeq = toSeq
        self.atS = atS
        self.connection = connection
        self.faults = faults
        self.account = account
    }
}

extension RunReport {
    /// How far before a failure a fault is named with it, by default.
    package static let failureWindowS = 30.0
    /// The most faults named with one failure (the latest ones).
    static let faultsPerFailure = 10

    /// Every failure the report shows (losses, duplicates and reorders from the anomalies, streams that never resumed
    /// after a fault, half-open connections the pair never noticed), in time order, each with the fault occurrences
    /// in the `window` seconds before it.
    package func failureRecords(window: Double = RunReport.failureWindowS) -> [FailureRecord] {
        var records: [FailureRecord] = []
        let gaps = anomalies.filter { $0.kind == .gap }
        let mayBeLost = Set(streams.filter { $0.contract == .atMostOnce }.map { "\($0.stream) \($0.direction) \($0.receiver ?? "")" })
        for anomaly in anomalies {
            switch anomaly.kind {
            case .lost where mayBeLost.contains("\(anomaly.stream) \(anomaly.direction) \(anomaly.receiver ?? "")"):
                continue  // its contract lets it be lost: counted (lost_qos0), not a failure
            case .lost:
                // A loss is known at the end; the gap that showed it says when and where.
                let gap = gaps.first {
                    $0.stream == anomaly.stream && $0.direction == anomaly.direction && $0.receiver == anomaly.receiver
                        && ($0.fromSeq ?? .max) <= (anomaly.fromSeq ?? 0)
                        && (anomaly.fromSeq ?? 0) <= ($0.toSeq ?? .min)
                }
                let at = gap?.atS ?? anomaly.atS
                let connection = gap.map(\.connection).flatMap { $0 == 0 ? nil : $0 }
                let seen =
                    gap.map { "the gap showed on connection #\($0.connection) at \(ReportText.clock($0.atS))" } ?? "never followed by another message"
                records.append(failure(anomaly, at: at, connection: connection, seen: seen, window: window))
            case .duplicated, .reordered:
                let seen = "on connection #\(anomaly.connection) at \(ReportText.clock(anomaly.atS))"
                records.append(
                    failure(anomaly, at: anomaly.atS, connection: anomaly.connection == 0 ? nil : anomaly.connection, seen: seen, window: window)
                )
            default:
                continue
            }
        }
        for fault in faults where (fault.neverResumed ?? 0) > 0 {
            let count = fault.neverResumed ?? 0
            records.append(
                FailureRecord(
                    kind: "never_resumed",
                    atS: fault.atS,
                    faults: [fault.occurrence],
                    account: "\(count) stream\(count == 1 ? "" : "s") interrupted by \(fault.kind) #\(fault.occurrence) at "
                        + "\(ReportText.clock(fault.atS)) never delivered a new message afterwards."
                )
            )
        }
        for halfOpen in recovery.missedHalfOpens {
            let at = faults.first { $0.occurrence == halfOpen.occurrence }?.atS ?? 0
            records.append(
                FailureRecord(
                    kind: "half_open_unnoticed",
                    atS: at,
                    faults: [halfOpen.occurrence],
                    account: "\(halfOpen.kind) #\(halfOpen.occurrence) at \(ReportText.clock(at)) left \(halfOpen.unnoticed) of "
                        + "\(halfOpen.connections) connection(s) half-open without the pair noticing (longest "
                        + "\(ReportText.seconds(halfOpen.longestS)))."
                )
            )
        }
        return records.sorted { ($0.atS, $0.kind) < ($1.atS, $1.kind) }
    }

    /// A loss, duplicate or reorder with the faults before it.
    private func failure(_ anomaly: Anomaly, at: Double, connection: UInt64?, seen: String, window: Double) -> FailureRecord {
        let before = faults.filter { $0.atS <= at && $0.atS + $0.forS >= at - window }.suffix(Self.faultsPerFailure)
        let seqs =
            switch (anomaly.fromSeq, anomaly.toSeq) {
            case (let from?, let to?) where from != to: "seq \(from)–\(to)"
            case (let from?, _): "seq \(from)"
            default: "messages"
            }
        let causes =
            before.isEmpty
            ? "no fault in the \(ReportText.seconds(window)) before it"
            : "after "
                + before.map { "\($0.kind) #\($0.occurrence) (\(ReportText.clock($0.atS))\($0.forS > 0 ? ", \(ReportText.seconds($0.forS))" : ""))" }
                .joined(separator: ", ")
        let what =
            anomaly.stream.isEmpty ? "" : "\(ReportText.stream(anomaly.stream, receiver: anomaly.receiver)) \(anomaly.direction.rawValue) "
        var record = FailureRecord(
            kind: anomaly.kind.rawValue,
            stream: anomaly.stream.isEmpty ? nil : anomaly.stream,
            direction: anomaly.direction,
            fromSeq: anomaly.fromSeq,
            toSeq: anomaly.toSeq,
            atS: at,
            connection: connection,
            faults: before.map(\.occurrence),
            account: "\(what)\(anomaly.kind.rawValue) \(seqs): \(seen), \(causes)."
        )
        record.receiver = anomaly.receiver
        return record
    }
}
