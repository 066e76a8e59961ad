import Foundation
import Synchronization

/// How long this process waited for a CPU while the probe ran: a thread of its own sleeps 10 ms at a time and adds up
/// what each sleep overshot by more than a millisecond. The unit lane runs niced beside the pair lanes, and a loaded
/// machine can hold it off the CPU for seconds; a test's wall-clock bound widens by what the probe saw, so that it
/// judges the code, not the machine.
final class StarvationProbe: Sendable {
    private let stalled = Atomic<Int64>(0)
    private let running = Atomic<Bool>(true)
    private let done = DispatchSemaphore(value: 0)

    /// Starts measuring at once.
    init() {
        let thread = Thread { [self] in
            let tick: Int64 = 10_000_000
            while running.load(ordering: .acquiring) {
                let before = DispatchTime.now().uptimeNanoseconds
                usleep(UInt32(tick / 1_000))
                let overshot = Int64(DispatchTime.now().uptimeNanoseconds - before) - tick
                if overshot > 1_000_000 { stalled.add(overshot, ordering: .relaxed) }
            }
            done.signal()
        }
        thread.start()
    }

    /// Stops the probe and returns what it measured.
    func stop() -> Duration {
        running.store(false, ordering: .releasing)
        done.wait()
        return .nanoseconds(stalled.load(ordering: .relaxed))
    }
}
