package import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Adaptive busy polling for the proxy's event loops: for a short window after a relay moved
/// bytes, the loop's thread stays on its CPU checking for new I/O instead of going to sleep in
/// `epoll_wait`. The next message of an exchange in progress (a reply, the next request) is then
/// relayed without a thread wake-up, which on a virtual machine costs tens of microseconds per
/// hop: the latency the proxy adds is what a measuring tool must keep small.
///
/// The spin yields the CPU on every turn (`sched_yield`), so it only uses time nobody else
/// wants, and it stops as soon as I/O is ready or the window has passed since the last activity:
/// an idle proxy sleeps as before. This is haproxy's `busy-polling`, bounded in time.
package final class BusyPolling: Sendable {
    private let pollers: [ObjectIdentifier: LoopBusyPoller]

    private init(pollers: [ObjectIdentifier: LoopBusyPoller]) { self.pollers = pollers }

    /// Busy polling on every loop of `group`, or nil when `window` is not positive or no loop's
    /// epoll descriptor can be found (not Linux): the proxy then sleeps between events as usual.
    package static func start(on group: any EventLoopGroup, window: TimeAmount) async -> BusyPolling? {
        guard window > .zero else { return nil }
        var pollers: [ObjectIdentifier: LoopBusyPoller] = [:]
        for loop in group.makeIterator() {
            guard let selector = await EventLoopSelector.duplicateDescriptor(of: loop) else {
                for poller in pollers.values { poller.closeDescriptor() }
                return nil
            }
            pollers[ObjectIdentifier(loop)] = LoopBusyPoller(loop: loop, selector: selector, window: window)
        }
        return BusyPolling(pollers: pollers)
    }

    /// The poller of `loop` (nil for a loop of another group).
    func poller(for loop: any EventLoop) -> LoopBusyPoller? { pollers[ObjectIdentifier(loop)] }

    /// The last finished spin of each loop that has spun (for tests and diagnostics).
    var lastSpins: [LoopBusyPoller.Spin] { pollers.values.compactMap { $0.lastSpin.withLock { $0 } } }

    /// Releases the descriptors. Call after the event loops have stopped.
    package func close() {
        for poller in pollers.values { poller.closeDescriptor() }
    }
}

/// One loop's busy poller. Everything but `closeDescriptor` runs on `loop`.
final class LoopBusyPoller: @unchecked Sendable {
    private let loop: any EventLoop
    private let selector: CInt
    private let window: UInt64
    /// Loop-confined.
    private var lastActivity: UInt64 = 0
    private var spinScheduled = false
    /// What the last finished spin did (readable from any thread, for tests and diagnostics).
    let lastSpin = Mutex<Spin?>(nil)

    /// One spin: how many polls, how long it lasted, how long after the last activity it ended,
    /// and whether I/O (rather than the window) ended it.
    struct Spin: Sendable {
        var polls = 0
        var nanoseconds: UInt64 = 0
        var sinceActivity: UInt64 = 0
        var endedByIO = false
    }

    init(loop: any EventLoop, selector: CInt, window: TimeAmount) {
        self.loop = loop
        self.selector = selector
        self.window = UInt64(window.nanoseconds)
    }

    /// Bytes were relayed on this loop: keep polling for `window` from now. Call on the loop.
    func noteActivity() {
        lastActivity = NIODeadline.now().uptimeNanoseconds
        guard !spinScheduled else { return }
        spinScheduled = true
        // Runs after this turn's I/O is handled; returning lets the loop's epoll_wait find the
        // ready event without sleeping.
        loop.execute { [self] in spin() }
    }

    /// Tasks queued behind the spin wait for it: at most the window.
    private func spin() {
        let start = NIODeadline.now().uptimeNanoseconds
        var spin = Spin()
        var descriptor = pollfd(fd: selector, events: Int16(POLLIN), revents: 0)
        // At least one poll, however late the loop got here (a thread the scheduler kept off the CPU past the window
        // still looks once before it sleeps).
        repeat {
            spin.polls += 1
            if poll(&descriptor, 1, 0) != 0 {
                spin.endedByIO = true
                break
            }
            sched_yield()
        } while NIODeadline.now().uptimeNanoseconds &- lastActivity < window
        let end = NIODeadline.now().uptimeNanoseconds
        spin.nanoseconds = end &- start
        spin.sinceActivity = end &- lastActivity
        lastSpin.withLock { $0 = spin }
        spinScheduled = false
    }

    func closeDescriptor() { close(selector) }
}
