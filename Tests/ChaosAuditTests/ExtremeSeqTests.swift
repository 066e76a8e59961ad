import ChaosCore
import Testing

@testable import ChaosAudit

/// Seqs and counts at the edges of Int64 never trap; an absurd jump is one anomaly, not 10^18 lost messages.
@Suite("Extreme seqs and counts")
struct ExtremeSeqTests {
    @Test("removing a one-seq interval that is not the first leaves no empty interval behind")
    func removeOneSeqInterval() {
        var set = SeqRangeSet()
        for value in [1, 2, 5, 9, 10] as [Int64] { set.insert(value) }
        let removed = set.remove(5)
        #expect(removed)
        #expect(set.intervals == [.init(lower: 1, upper: 2), .init(lower: 9, upper: 10)])
        #expect(set.count == 4)
        #expect(!set.contains(5) && !set.contains(6))
        #expect(set.holes(from: 1, through: 10).map(\.count) == [6])
        set.insert(5)
        #expect(set.intervals.count == 3 && set.count == 5)
    }

    @Test("Int64.max and then 1 inserted and removed do not trap")
    func extremes() {
        var set = SeqRangeSet()
        set.insert(.max)
        set.insert(1)
        let removedMax = set.remove(.max)
        let removedOne = set.remove(1)
        #expect(removedMax && removedOne)
        #expect(set.isEmpty && set.count == 0)
        set.insert(.min)
        set.insert(.max)
        set.insert(.max - 1)
        let removedNearMax = set.remove(.max - 1)
        let removedMin = set.remove(.min)
        #expect(removedNearMax && removedMin)
        #expect(SeqRangeSet.Interval(lower: .min, upper: .max).count == .max)
    }

    @Test("a seq near 10^18 (the scanner reads up to 18 digits) after ordinary ones is one seq-jump anomaly; totals stay exact")
    func seqJump() throws {
        var s = TrafficScript()
        s.open(1)
        s.relay(1, [1, 2, 3])
        s.relay(1, [999_999_999_999_999_999])
        s.relay(1, [4])
        s.relay(1, [900_000_000_000_000_000])
        let engine = try AuditEngine(spec: ProtocolSpec())
        engine.ingest(s.events)
        let result = engine.finish()
        #expect(result.totals.ok == 4 && result.totals.lost == 0)
        #expect(result.messages.seqJumps == 4, "each jump read and written")
        #expect(result.anomalyCounts["seq jump"] == 1)
        #expect(result.anomalies.first { $0.kind == .seqJump }?.toSeq == 999_999_999_999_999_999)
    }

    @Test("summed counts saturate instead of trapping")
    func saturatingTotals() {
        var a = DeliveryCounts()
        a.lost = .max - 1
        a.ok = .max
        var b = DeliveryCounts()
        b.lost = 10
        b.ok = 1
        a.add(b)
        #expect(a.lost == .max && a.ok == .max)
        #expect(a.deliveryRatio.isFinite)
    }
}
