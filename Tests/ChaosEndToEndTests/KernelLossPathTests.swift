import Foundation
import Testing

/// Loss as the kernel sees it (issue: a dead path acknowledges nothing, its loss part): on the kernel path (the default
/// where chaos has CAP_NET_ADMIN and nft), a `loss` posted to `chaos proxy --api` drops the uploading client's
/// own segments in the kernel, so its TCP retransmits them; held in the proxy, the same loss only delays bytes the
/// client's TCP already saw acknowledged. The client and server are `Tests/deadpath/dead-path-peer.py`.
@Suite("Kernel loss: a loss drops the pair's segments in the kernel", .timeLimit(.minutes(3)))
struct KernelLossPathTests {
    static let loss = #"{"loss": {"rate": "5%", "burst": 2}}"#

    @Test(
        "on the kernel path, 5% loss for 4 s: the client's own TCP retransmits, the same connection carries every byte once, and chaos says the loss is in the kernel",
        .enabled(if: DeadPathTests.kernelPath, "needs root and nft (Debian's nftables): the kernel path")
    )
    func lossIsReal() async throws {
        let outcome = try await DeadPathTests.partition(4, fault: Self.loss)
        #expect(outcome.chaos.stdout.contains("; loss dropped in the kernel (queue "), "\(outcome.chaos.stdout)")
        // What the queue dropped, as chaos counted it at its end: about 5% of the segments drawn for.
        let line = outcome.chaos.stdout.split(separator: "\n").first { $0.hasPrefix("loss in the kernel: ") } ?? ""
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        #expect(numbers.count == 2 && numbers[0] > 0 && numbers[1] > numbers[0] * 5, "\(outcome.chaos.stdout)")
        // The client's own TCP sent again: at least as often as the queue dropped its segments, far more than held in
        // the proxy (a few spurious ones there: a loaded loopback has them too).
        let retransmitted = outcome.peer["retrans_during"] as? Int ?? -1
        #expect(retransmitted >= (numbers.first ?? 1) / 2 && retransmitted >= 10, "\(outcome.peer)")
        #expect(outcome.error == nil && outcome.sent > 1 << 20, "\(outcome.peer)")
        #expect(outcome.received == [outcome.sent], "\(outcome.peer)")
    }

    @Test("held in the proxy (CHAOS_DEAD_PATH=proxy), the same loss drops no segment: chaos drew none in the kernel, and every byte arrives once")
    func emulatedLossDropsNoSegment() async throws {
        let outcome = try await DeadPathTests.partition(4, fault: Self.loss, environment: ["CHAOS_DEAD_PATH": "proxy"])
        #expect(!outcome.chaos.stdout.contains("loss in the kernel"), "\(outcome.chaos.stdout)")
        #expect(outcome.chaos.stdout.contains("dead path: held in the proxy"), "\(outcome.chaos.stdout)")
        #expect(outcome.error == nil && outcome.sent > 1 << 20, "\(outcome.peer)")
        #expect(outcome.received == [outcome.sent], "\(outcome.peer)")
    }
}
