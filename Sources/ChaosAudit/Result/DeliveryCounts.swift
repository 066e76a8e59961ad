package import ChaosCore

/// The delivery classes of PRODUCT §4 for one stream and direction, or summed over all of them.
package struct DeliveryCounts: Sendable, Codable, Equatable {
    /// Messages with a seq read from the producer (every read, retransmissions included).
    package var sent: Int64 = 0
    /// Messages with a seq written to the consumer (every delivery, duplicates included).
    package var delivered: Int64 = 0
    /// Seqs delivered at least once.
    package var ok: Int64 = 0
    /// Seqs never delivered: holes below the highest seq seen, or sent and never delivered.
    package var lost: Int64 = 0
    /// Ok seqs that were sent on a connection that was cut before delivering them, and delivered on a later one.
    package var recovered: Int64 = 0
    /// Extra deliveries of a seq on the same connection.
    package var duplicated: Int64 = 0
    /// Extra deliveries of a seq on a later connection.
    package var redelivered: Int64 = 0
    /// Extra deliveries of a seq its producer marked as retained state sent again (a broker's retained message, sent
    /// anew on each subscription): neither duplicated nor redelivered.
    package var retained: Int64 = 0
    /// Ok seqs first delivered after a higher seq of the stream.
    package var reordered: Int64 = 0
    /// Jumps in the delivered sequence.
    package var gaps: Int64 = 0
    /// Delivered seqs that no cumulative ack covered (0 when `ack` is not configured).
    package var unacked: Int64 = 0
    /// Frames cut in half by the end of a connection (counted on the delivered side).
    package var truncated: Int64 = 0
    /// Seqs neither ok nor lost: the consumer's TCP took them on a connection that then ended abortively, past its last
    /// ack, and nothing settled them since (no ack vouched for or denied them, no resend delivered them).
    package var unconfirmed: Int64 = 0
    /// ok / (ok + lost); 1 when nothing was expected.
    package var deliveryRatio: Double = 1

    /// All zero.
    package init() {}

    private enum CodingKeys: String, CodingKey {
        case sent, delivered, ok, lost, recovered, duplicated, redelivered, retained, reordered, gaps, unacked, truncated, unconfirmed
        case deliveryRatio
    }

    /// Decodes the counts; `unconfirmed` and `retained` are absent from reports written before they existed.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sent = try container.decode(Int64.self, forKey: .sent)
        delivered = try container.decode(Int64.self, forKey: .delivered)
        ok = try container.decode(Int64.self, forKey: .ok)
        lost = try container.decode(Int64.self, forKey: .lost)
        recovered = try container.decode(Int64.self, forKey: .recovered)
        duplicated = try container.decode(Int64.self, forKey: .duplicated)
        redelivered = try container.decode(Int64.self, forKey: .redelivered)
        retained = try container.decodeIfPresent(Int64.self, forKey: .retained) ?? 0
        reordered = try container.decode(Int64.self, forKey: .reordered)
        gaps = try container.decode(Int64.self, forKey: .gaps)
        unacked = try container.decode(Int64.self, forKey: .unacked)
        truncated = try container.decode(Int64.self, forKey: .truncated)
        unconfirmed = try container.decodeIfPresent(Int64.self, forKey: .unconfirmed) ?? 0
        deliveryRatio = try container.decode(Double.self, forKey: .deliveryRatio)
    }

    /// Recomputes ``deliveryRatio`` from ``ok`` and ``lost``.
    package mutating func updateRatio() {
        deliveryRatio = ok == 0 && lost == 0 ? 1 : Double(ok) / (Double(ok) + Double(lost))
    }

    /// Adds `other`'s counts (the ratio is recomputed).
    /// Sums saturate at `Int64.max` rather than trap.
    package mutating func add(_ other: DeliveryCounts) {
        func sum(_ a: inout Int64, _ b: Int64) {
            let (total, overflow) = a.addingReportingOverflow(b)
            a = overflow ? (b > 0 ? .max : .min) : total
        }
        sum(&sent, other.sent)
        sum(&delivered, other.delivered)
        sum(&ok, other.ok)
        sum(&lost, other.lost)
        sum(&recovered, other.recovered)
        sum(&duplicated, other.duplicated)
        sum(&redelivered, other.redelivered)
        sum(&retained, other.retained)
        sum(&reordered, other.reordered)
        sum(&gaps, other.gaps)
        sum(&unacked, other.unacked)
        sum(&truncated, other.truncated)
        sum(&unconfirmed, other.unconfirmed)
        updateRatio()
    }

    /// The figure an `expect:` line names (`lost`, `gaps`, …), when it is a count of this struct.
    package func count(named name: String) -> Int64? {
        switch name {
        case "sent": sent
        case "delivered": delivered
        case "ok": ok
        case "lost": lost
        case "recovered": recovered
        case "duplicated": duplicated
        case "redelivered": redelivered
        case "retained": retained
        case "reordered": reordered
        case "gaps": gaps
        case "unacked": unacked
        case "truncated": truncated
        case "unconfirmed": unconfirmed
        default: nil
        }
    }
}

/// One stream and direction's results.
package struct StreamResult: Sendable, Codable, Equatable {
    /// The logical stream name.
    package var stream: String
    /// Which way its messages travel.
    package var direction: Direction
    /// The receiver whose copy of the stream this is (a subscriber's client id); nil when the stream has one
    /// consumer at a time.
    package var receiver: String?
    /// Its counts (flattened into the same JSON object).
    package var counts: DeliveryCounts
    /// The lowest seq delivered.
    package var firstSeq: Int64?
    /// The highest seq delivered.
    package var highestSeq: Int64?
    /// The highest cumulative ack seen for it (from the other direction).
    package var ackedUpTo: Int64?
    /// For a receiver's copy of a stream that fans out, where its lost seqs died (nil otherwise, or nothing lost).
    package var lostWhere: LossPlacement?
    /// The weakest delivery contract its messages carried (a QoS: `at-most-once` for QoS 0); nil when the
    /// protocol promises none per message. An at-most-once stream's losses are counted, and judged apart
    /// (`lost_qos0`).
    package var contract: DeliveryContract?

    /// Creates a stream result.
    package init(
        stream: String,
        direction: Direction,
        receiver: String? = nil,
        counts: DeliveryCounts,
        firstSeq: Int64?,
        highestSeq: Int64?,
        ackedUpTo: Int64?
    ) {
        self.stream = stream
        self.direction = direction
        self.receiver = receiver
        self.counts = counts
        self.firstSeq = firstSeq
        self.highestSeq = highestSeq
        self.ackedUpTo = ackedUpTo
    }

    private enum CodingKeys: String, CodingKey { case stream, direction, receiver, firstSeq, highestSeq, ackedUpTo, lostWhere, contract }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        stream = try container.decode(String.self, forKey: .stream)
        direction = try container.decode(Direction.self, forKey: .direction)
        receiver = try container.decodeIfPresent(String.self, forKey: .receiver)
        firstSeq = try container.decodeIfPresent(Int64.self, forKey: .firstSeq)
        highestSeq = try container.decodeIfPresent(Int64.self, forKey: .highestSeq)
        ackedUpTo = try container.decodeIfPresent(Int64.self, forKey: .ackedUpTo)
        lostWhere = try container.decodeIfPresent(LossPlacement.self, forKey: .lostWhere)
        contract = try container.decodeIfPresent(DeliveryContract.self, forKey: .contract)
        counts = try DeliveryCounts(from: decoder)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(stream, forKey: .stream)
        try container.encode(direction, forKey: .direction)
        try container.encodeIfPresent(receiver, forKey: .receiver)
        try container.encodeIfPresent(firstSeq, forKey: .firstSeq)
        try container.encodeIfPresent(highestSeq, forKey: .highestSeq)
        try container.encodeIfPresent(ackedUpTo, forKey: .ackedUpTo)
        try container.encodeIfPresent(lostWhere, forKey: .lostWhere)
        try container.encodeIfPresent(contract, forKey: .contract)
        try counts.encode(to: encoder)
    }
}
