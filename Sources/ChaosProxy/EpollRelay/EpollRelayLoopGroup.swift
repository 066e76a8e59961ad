import Glibc
package import NIOCore
import Synchronization

/// The threads that relay connections no fault or shaping touches, outside NIO: each runs its
/// own epoll loop with plain reads and writes, which costs about half of what two NIO channels
/// cost per connection. A connection moves to NIO the moment a fault that shapes its bytes reaches it (a disconnect cuts it in place).
///
/// Give it to proxies through ``ProxyServer/Options/epollRelay``; call ``shutdown()`` after the
/// proxies have stopped.
package final class EpollRelayLoopGroup: Sendable {
    let loops: [EpollRelayLoop]
    private let stopped = Atomic<Bool>(false)

    /// Starts `threads` relay threads; each keeps polling for `busyPoll` after an event before it
    /// sleeps (zero: it sleeps at once). Throws when the system refuses a thread or an epoll instance.
    package init(threads: Int, busyPoll: TimeAmount) throws {
        // A splice into a socket its peer reset raises SIGPIPE (splice has no MSG_NOSIGNAL, which the relay's sends
        // use): ignored process-wide, as NIO does once it opens a socket, which a proxy whose connections are all
        // relayed here may never do.
        _ = signal(SIGPIPE, SIG_IGN)
        let window = UInt64(max(0, busyPoll.nanoseconds))
        var loops: [EpollRelayLoop] = []
        do {
            for index in 0..<max(1, threads) {
                loops.append(try EpollRelayLoop(name: "chaos-relay-\(index)", busyPollNanoseconds: window))
            }
        } catch {
            for loop in loops { loop.stop() }
            throw error
        }
        self.loops = loops
    }

    /// Stops every thread (resetting whatever they still relay). Safe to call more than once.
    package func shutdown() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for loop in loops { loop.stop() }
    }
}
