import Testing

@testable import ChaosProxy

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

    @Test("what went out unacknowledged is what the last live reading left unsent; none once all is acknowledged")
    func sentUnacknowledged() {
        var tracker = AcknowledgementTracker(dialled: false)
        tracker.wrote(100)
        #expect(tracker.sentUnacknowledged == nil, "never read: nothing known sent")
        #expect(tracker.update(kernelBytesAcked: 30) == 30)
        tracker.sawUnsent(20)
        #expect(tracker.sentUnacknowledged == 80)
        tracker.wrote(50)
        #expect(tracker.sentUnacknowledged == 80, "written since: not known sent until read")
        tracker.sawUnsent(200)
        #expect(tracker.sentUnacknowledged == 80, "never goes back")
        tracker.sawUnsent(0)
        #expect(tracker.sentUnacknowledged == 150)
        #expect(tracker.update(kernelBytesAcked: 150) == 150)
        #expect(tracker.sentUnacknowledged == nil)
    }

    @Test(
        "what went out into a dead path in the kernel, and was not acknowledged since it ended, is not taken at a reset: it was dropped, and waits in the retransmission backoff"
    )
    func deadPathDrops() {
        var tracker = AcknowledgementTracker(dialled: false)
        tracker.wrote(100)
        #expect(tracker.update(kernelBytesAcked: 40) == 40)
        tracker.deadPath(true)
        tracker.wrote(50)
        tracker.sawSent(150)
        #expect(tracker.sentUnacknowledged == nil, "a peer's reset while the path drops")
        #expect(tracker.update(kernelBytesAcked: 40, notSentBeforeReset: 0) == nil, "the proxy's reset while it drops")
        tracker.deadPath(false)
        tracker.wrote(10)
        tracker.sawSent(160)
        #expect(tracker.sentUnacknowledged == nil, "its drops not yet acknowledged after it")
        #expect(tracker.update(kernelBytesAcked: 40, notSentBeforeReset: 0) == nil)
        #expect(tracker.update(kernelBytesAcked: 150) == 150, "the retransmissions got through")
        #expect(tracker.sentUnacknowledged == 160, "what went out since counts again")
        #expect(tracker.update(kernelBytesAcked: 150, notSentBeforeReset: 0) == 160)
    }

    @Test("the kernel's count of bytes sent once (which outlives a reset) says what went out; never more than was written")
    func sentOnce() {
        var tracker = AcknowledgementTracker(dialled: true)
        tracker.wrote(100)
        tracker.sawSent(0)
        #expect(tracker.sentUnacknowledged == nil, "a kernel that does not say")
        tracker.sawSent(60)
        #expect(tracker.sentUnacknowledged == 60)
        tracker.sawSent(500)
        #expect(tracker.sentUnacknowledged == 100)
        #expect(tracker.update(kernelBytesAcked: 41) == 40, "the SYN is not a byte")
        #expect(tracker.sentUnacknowledged == 100)
    }

    @Test(
        "a leg still outstanding is polled less and less often: 1 ms twice, then 2, 4, 8, at most 16 ms; a delayed ACK (40 ms) costs 7 polls, not 40"
    )
    func pollBackoff() {
        let delays = (1...8).map { AcknowledgementTracker.pollDelay(afterPolls: $0) / 1_000_000 }
        #expect(delays == [1, 2, 4, 8, 16, 16, 16, 16])
        var elapsed = AcknowledgementTracker.pollInterval
        var polls = 1
        while elapsed < 40_000_000 {
            elapsed += AcknowledgementTracker.pollDelay(afterPolls: polls)
            polls += 1
        }
        #expect(polls == 7, "polls until a 40 ms delayed ACK is seen: \(polls)")
        #expect(elapsed - 40_000_000 <= 16_000_000, "seen at most 16 ms late")
    }
}
