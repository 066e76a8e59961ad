import CChaosEpoll
import ChaosCore
import Glibc
import Synchronization

/// Something registered with a ``EpollRelayLoop``: told, on the loop's thread, what epoll reported.
protocol EpollRelaySelectable: AnyObject {
    /// Handles `events` (``CHAOS_EPOLL_IN`` …) for the descriptor registered as `slot` (0 or 1).
    func handle(events: UInt32, slot: Int)
}

/// One relay thread: an edge-triggered epoll instance, the connections registered with it, a
/// queue of tasks other threads hand it, and busy polling after I/O.
///
/// Everything but ``execute(_:)``/``submit(_:)`` runs on the loop's own thread.
final class EpollRelayLoop: @unchecked Sendable {
    /// Where reads land before they are written on (one buffer per thread, so an idle connection holds none).
    let scratch: UnsafeMutableRawBufferPointer
    /// How long the loop polls after an event before it sleeps, in nanoseconds.
    private let busyPollNanoseconds: UInt64
    private let epoll: Int32
    private let wakeFD: Int32
    private let queue = Mutex<(tasks: [@Sendable () -> Void], signalled: Bool, stopped: Bool)>(([], false, false))
    private var registered: [UInt64: any EpollRelaySelectable] = [:]
    private var nextKey: UInt64 = 1
    /// Connections that stopped reading to let others run; resumed on the next turn.
    private var yielded: [EpollRelayConnection] = []
    /// Connect deadlines, in the order they were set (all have the same length, so this is sorted).
    private var deadlines: [(at: UInt64, key: UInt64)] = []
    private var deadlineHead = 0
    /// Connections waiting for their peers to acknowledge bytes, polled every
    /// ``AcknowledgementTracker/pollInterval`` (all together: one timer for the loop).
    private var acknowledgementWatch: [EpollRelayConnection] = []
    private var acknowledgementPollAt: UInt64?
    /// Other timed actions (rare: an accept pause), in no order.
    /// Timers by due time (a heap: a loop with thousands of lingering connections finds the next one in O(log n)),
    /// their actions by id.
    private var timers = MinHeap<TimerEntry>()
    private var timerActions: [UInt64: () -> Void] = [:]
    private var nextTimerID: UInt64 = 0
    private var running = true
    /// Empty splice pipes of connections that ended, kept for the next ones (a pipe costs a few system calls to make):
    /// at most ``pipesKept``.
    private var pipes: [SplicePipe] = []
    static let pipesKept = 64
    /// Set once the thread has ended: registering is refused from then on.
    private var closed = false
    private var thread: pthread_t?

    /// Creates the loop and starts its thread, named `name`.
    init(name: String, busyPollNanoseconds: UInt64) throws(RawSocketError) {
        let epoll = chaos_epoll_create()
        guard epoll >= 0 else { throw RawSocketError(call: "epoll_create1", code: -epoll) }
        let wakeFD = chaos_eventfd()
        guard wakeFD >= 0 else {
            close(epoll)
            throw RawSocketError(call: "eventfd", code: -wakeFD)
        }
        _ = chaos_epoll_add_exclusive(epoll, wakeFD, 0)
        self.epoll = epoll
        self.wakeFD = wakeFD
        self.busyPollNanoseconds = busyPollNanoseconds
        scratch = .allocate(byteCount: 64 * 1024, alignment: 16)
        let context = Unmanaged.passRetained(LoopStart(loop: self, name: name)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread,
            nil,
            { argument in
                let start = Unmanaged<LoopStart>.fromOpaque(argument!).takeRetainedValue()
                chaos_name_thread(start.name)
                start.loop.run()
                return nil
            },
            context
        )
        guard created == 0 else {
            Unmanaged<LoopStart>.fromOpaque(context).release()
            throw RawSocketError(call: "pthread_create", code: created)
        }
        self.thread = thread
    }

    private final class LoopStart {
        let loop: EpollRelayLoop
        let name: String
        init(loop: EpollRelayLoop, name: String) {
            self.loop = loop
            self.name = name
        }
    }

    // MARK: other threads

    /// Runs `task` on the loop's thread, soon. Once the loop has stopped it is refused (not run, here
    /// or anywhere): returns false.
    @discardableResult
    func execute(_ task: @escaping @Sendable () -> Void) -> Bool {
        let wake = queue.withLock { queue -> Bool? in
            guard !queue.stopped else { return nil }
            queue.tasks.append(task)
            defer { queue.signalled = true }
            return !queue.signalled
        }
        guard let wake else { return false }
        if wake {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        return true
    }

    /// Whether the loop has stopped taking work.
    var isStopped: Bool { queue.withLock { $0.stopped } }

    /// Runs `body` on the loop's thread and returns what it returned; nil when the loop has stopped
    /// (then `body` does not run).
    func submit<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result? {
        await withCheckedContinuation { continuation in
            let taken = execute { continuation.resume(returning: body()) }
            if !taken { continuation.resume(returning: nil) }
        }
    }

    /// Stops the thread and waits for it; whatever is still registered is reset, and tasks still
    /// queued run here (later ones are refused). Call once, not from the loop.
    func stop() {
        guard execute({ [self] in running = false }) else { return }
        if let thread { pthread_join(thread, nil) }
        thread = nil
        closed = true
        for task in takeTasks(stopping: true) { task() }
        let leftovers = registered.values.compactMap { $0 as? EpollRelayConnection }
        registered = [:]
        for connection in leftovers { connection.terminate() }
        for pipe in pipes { pipe.close() }
        pipes = []
        close(epoll)
        close(wakeFD)
        scratch.deallocate()
    }

    // MARK: the loop's thread

    /// An empty splice pipe: a kept one, or a new one (nil when the system refuses one).
    func takePipe() -> SplicePipe? {
        pipes.popLast() ?? SplicePipe.make()
    }

    /// Keeps `pipe` for a later connection when it is empty and the loop keeps fewer than ``pipesKept``; else closes it.
    func giveBack(_ pipe: SplicePipe) {
        guard pipe.held == 0, pipes.count < Self.pipesKept, !closed else { return pipe.close() }
        pipes.append(pipe)
    }

    /// Registers descriptors for `owner`, one per slot, and returns its key; throws (nothing
    /// registered) when epoll refused one or the loop has stopped.
    func register(
        _ owner: any EpollRelaySelectable,
        descriptors: [Int32],
        exclusive: Bool = false
    ) throws(RawSocketError) -> UInt64 {
        guard !closed else { throw RawSocketError(call: "epoll_ctl", code: ESHUTDOWN) }
        let key = nextKey
        nextKey += 1
        for (slot, fd) in descriptors.enumerated() {
            let token = key << 1 | UInt64(slot)
            let added = exclusive ? chaos_epoll_add_exclusive(epoll, fd, token) : chaos_epoll_add_stream(epoll, fd, token)
            if added != 0 {
                // The code comes back from the call itself: the removals below may change errno.
                for earlier in descriptors.prefix(slot) { _ = chaos_epoll_remove(epoll, earlier) }
                throw RawSocketError(call: "epoll_ctl", code: added < 0 ? -added : added)
            }
        }
        registered[key] = owner
        return key
    }

    /// Takes descriptors out of epoll (they stay open) and forgets their owner.
    func unregister(key: UInt64, descriptors: [Int32]) {
        guard !closed else { return }
        for fd in descriptors { _ = chaos_epoll_remove(epoll, fd) }
        registered.removeValue(forKey: key)
    }

    /// Forgets an owner whose descriptors were closed (closing took them out of epoll).
    func forget(key: UInt64) { registered.removeValue(forKey: key) }

    /// Resumes `connection` on the next turn (it read its share for this one).
    func yieldTurn(_ connection: EpollRelayConnection) { yielded.append(connection) }

    /// Asks to hear about the connection registered as `key` when its upstream connect has taken
    /// `nanoseconds` (nothing is heard if it is gone by then).
    func connectDeadline(key: UInt64, after nanoseconds: UInt64) {
        deadlines.append((Self.now() &+ nanoseconds, key))
    }

    /// Polls `connection`'s acknowledgements on the next round (it re-registers while bytes are outstanding).
    func watchAcknowledgements(_ connection: EpollRelayConnection) {
        acknowledgementWatch.append(connection)
        if acknowledgementPollAt == nil { acknowledgementPollAt = Self.now() &+ UInt64(AcknowledgementTracker.pollInterval) }
    }

    /// Runs `action` on the loop's thread after `nanoseconds`.
    func schedule(after nanoseconds: UInt64, _ action: @escaping () -> Void) {
        nextTimerID &+= 1
        timers.insert(TimerEntry(at: Self.now() &+ nanoseconds, id: nextTimerID))
        timerActions[nextTimerID] = action
    }

    /// The earliest time a deadline or timer is due, if any.
    private var nextDue: UInt64? {
        let connect = deadlineHead < deadlines.count ? deadlines[deadlineHead].at : nil
        let timer = timers.min?.at
        return [connect, timer, acknowledgementPollAt].compactMap { $0 }.min()
    }

    private func run() {
        var tokens = [UInt64](repeating: 0, count: 256)
        var events = [UInt32](repeating: 0, count: 256)
        var lastEvent: UInt64 = 0
        while running {
            let timeout: Int32
            let now = Self.now()
            if !yielded.isEmpty || now &- lastEvent < busyPollNanoseconds {
                timeout = 0
            } else if let due = nextDue {
                let wait = due > now ? due - now : 0
                timeout = Int32(min(wait / 1_000_000 + 1, 60_000))
            } else {
                timeout = -1
            }
            let count = chaos_epoll_wait(epoll, &tokens, &events, 256, timeout)
            if count > 0 {
                lastEvent = Self.now()
                for index in 0..<Int(count) { dispatch(token: tokens[index], events: events[index]) }
            } else if count == 0, timeout == 0, yielded.isEmpty {
                sched_yield()
            }
            if !yielded.isEmpty {
                let turn = yielded
                yielded = []
                for connection in turn { connection.resume() }
            }
            expireDeadlines()
        }
    }

    private func dispatch(token: UInt64, events: UInt32) {
        guard token != 0 else { return runTasks() }
        registered[token >> 1]?.handle(events: events, slot: Int(token & 1))
    }

    private func runTasks() {
        var drained: UInt64 = 0
        _ = read(wakeFD, &drained, 8)
        for task in takeTasks(stopping: false) { task() }
    }

    /// Empties the task queue; with `stopping`, later tasks run on their callers' threads.
    private func takeTasks(stopping: Bool) -> [@Sendable () -> Void] {
        queue.withLock { queue in
            queue.signalled = false
            if stopping { queue.stopped = true }
            var taken: [@Sendable () -> Void] = []
            swap(&taken, &queue.tasks)
            return taken
        }
    }

    private func expireDeadlines() {
        if let due = acknowledgementPollAt, due <= Self.now() {
            let watched = acknowledgementWatch
            acknowledgementWatch = []
            acknowledgementPollAt = nil
            for connection in watched { connection.acknowledgementPollDue() }
        }
        if let first = timers.min, first.at <= Self.now() {
            // The timers due now run after they are taken, so one that schedules another waits for the next round.
            let now = Self.now()
            var due: [() -> Void] = []
            while let next = timers.min, next.at <= now {
                _ = timers.popMin()
                if let action = timerActions.removeValue(forKey: next.id) { due.append(action) }
            }
            for action in due { action() }
        }
        guard deadlineHead < deadlines.count else { return }
        let now = Self.now()
        while deadlineHead < deadlines.count, deadlines[deadlineHead].at <= now {
            let key = deadlines[deadlineHead].key
            deadlineHead += 1
            (registered[key] as? EpollRelayConnection)?.connectTimedOut()
        }
        if deadlineHead == deadlines.count {
            deadlines.removeAll(keepingCapacity: true)
            deadlineHead = 0
        } else if deadlineHead > 1024, deadlineHead * 2 > deadlines.count {
            deadlines.removeFirst(deadlineHead)
            deadlineHead = 0
        }
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

/// A timer's place in ``EpollRelayLoop``'s heap: due time, then the order it was scheduled in.
private struct TimerEntry: Comparable, Sendable {
    let at: UInt64
    let id: UInt64
    static func < (lhs: TimerEntry, rhs: TimerEntry) -> Bool { (lhs.at, lhs.id) < (rhs.at, rhs.id) }
}
