import Testing

@testable import ChaosAudit

@Suite("Recovery times as Prometheus histograms")
struct DurationHistogramTests {
    @Test("cumulative counts at each bound, the count and the sum, within the recorder's 3 significant digits")
    func cumulative() {
        var recorder = LatencyRecorder()
        for milliseconds: Int64 in [5, 40, 40, 300, 7_000] { recorder.record(nanoseconds: milliseconds * 1_000_000) }
        let histogram = recorder.histogram(bounds: [0.01, 0.05, 1, 5, 10])
        #expect(histogram.cumulative == [1, 3, 4, 4, 5])
        #expect(histogram.count == 5)
        #expect(abs(histogram.sumSeconds - 7.385) < 0.01, "\(histogram.sumSeconds)")
        #expect(LatencyRecorder().histogram(bounds: [1]) == DurationHistogram(bounds: [1], cumulative: [0], count: 0, sumSeconds: 0))
    }
}
