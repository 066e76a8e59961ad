@testable import ChaosProxy
import Testing

@Suite("AcknowledgementTracker: the kernel's counters in the relay's byte coordinates")
struct AcknowledgementTrackerTests {
    @Test("a dialled leg's SYN and a FIN are not bytes; nothing beyond what was written is reported")
    func synAndFIN() {
        var dialled = AcknowledgementTracker(dialled: true)
        dialled.wrote(10)
        #expect(dialled.update(kernelBytesAcked: 1) == nil, "only the SYN")
        #expect(dialled.update(kernelBytesAcked: 5) == 4)
        #expect(dialled.update(kernelBytesAcked: 12) == 10, "10 bytes and the FIN")
        #expect(!dialled.isOutstanding)
        var accepted = AcknowledgementTracker(dialled: false)
        accepted.wrote(3)
        #expect(accepted.update(kernelBytesAcked: 3) == 3)
    }

    @Test("before the proxy's own reset, what TCP sent counts as taken; what it had not sent does not")
    func beforeReset() {
        var tracker = AcknowledgementTracker(dialled: false)
        tracker.wrote(100)
        #expect(tracker.update(kernelBytesAcked: 40) == 40)
        #expect(tracker.update(kernelBytesAcked: 40, notSentBeforeReset: 25) == 75)
        #expect(tracker.update(kernelBytesAcked: 40, notSentBeforeReset: 90) == nil, "never goes back")
    }
}
