import Foundation

/// The report page's recovery-time histogram: how many fault occurrences the pair recovered from within each span of
/// time (its slowest interrupted stream's first new message, and the next accepted connection), as an inline SVG.
extension HTMLRenderer {
    /// The upper bounds of the histogram's buckets, in seconds (the last is open).
    static let recoveryBuckets: [Double] = [0.1, 0.5, 1, 2, 5, 10, 30, 60]

    /// The bucket of `seconds`: the first whose bound it does not pass, or the open one after them.
    package static func bucket(_ seconds: Double) -> Int {
        recoveryBuckets.firstIndex { seconds <= $0 } ?? recoveryBuckets.count
    }

    /// The label of bucket `index` (`≤ 0.5 s`, `> 60 s`).
    static func bucketLabel(_ index: Int) -> String {
        func s(_ value: Double) -> String { value < 1 ? "\(value) s" : "\(Int(value)) s" }
        return index < recoveryBuckets.count ? "≤ \(s(recoveryBuckets[index]))" : "> \(s(recoveryBuckets.last!))"
    }

    /// The histogram, or nothing when no fault occurrence was recovered from.
    func recoveryHistogram(_ report: RunReport) -> String {
        let series: [(name: String, color: String, values: [Double])] = [
            ("resume (slowest stream)", "#1f77b4", report.faults.compactMap(\.resumeS)),
            ("reconnect", "#ff7f0e", report.faults.compactMap(\.reconnectS)),
        ]
        guard series.contains(where: { !$0.values.isEmpty }) else { return "" }
        let slots = Self.recoveryBuckets.count + 1
        let counts = series.map { entry in
            entry.values.reduce(into: [Int](repeating: 0, count: slots)) { $0[Self.bucket($1)] += 1 }
        }
        let highest = max(1, counts.flatMap { $0 }.max() ?? 1)
        let (left, top, slotWidth, height) = (40.0, 10.0, 64.0, 120.0)
        let barWidth = (slotWidth - 12) / Double(series.count)
        var svg =
            "<svg id=recovery-histogram width=\"\(n(left + Double(slots) * slotWidth + 10))\" height=\"\(n(top + height + 40))\" role=img aria-label=\"recovery times by fault occurrence\">"
        svg +=
            "<line x1=\"\(n(left))\" y1=\"\(n(top + height))\" x2=\"\(n(left + Double(slots) * slotWidth))\" y2=\"\(n(top + height))\" stroke=\"#999\"/>"
        svg += "<text x=\"\(n(left - 6))\" y=\"\(n(top + 8))\" text-anchor=end>\(highest)</text>"
        for slot in 0..<slots {
            let x = left + Double(slot) * slotWidth
            for (index, entry) in series.enumerated() where counts[index][slot] > 0 {
                let barHeight = height * Double(counts[index][slot]) / Double(highest)
                svg +=
                    "<rect x=\"\(n(x + 6 + Double(index) * barWidth))\" y=\"\(n(top + height - barHeight))\" width=\"\(n(barWidth - 2))\" height=\"\(n(barHeight))\" fill=\"\(entry.color)\">"
                    + "<title>\(e(entry.name)) \(e(Self.bucketLabel(slot))): \(counts[index][slot])</title></rect>"
            }
            svg += "<text x=\"\(n(x + slotWidth / 2))\" y=\"\(n(top + height + 16))\" text-anchor=middle>\(e(Self.bucketLabel(slot)))</text>"
        }
        svg += "</svg>"
        let legend = series.map { "<span><i style=\"background:\($0.color)\"></i>\(e($0.name)) (\($0.values.count))</span>" }.joined()
        return "<p>Fault occurrences by how long the pair took to recover:</p>\(svg)<div class=legend>\(legend)</div>\n"
    }
}
