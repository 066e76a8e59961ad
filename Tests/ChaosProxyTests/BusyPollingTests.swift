import Foundation
import Glibc
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ChaosProxy

@Suite("Busy polling of the relay loops", .serialized, .timeLimit(.minutes(5)))
struct BusyPollingTests {
    @Test("each loop's epoll descriptor is found, and it says when that loop, and only it, has I/O waiting")
    func findsEachLoopsSelector() async throws {
        try await withGroup(threads: 2) { group in try await findsEachLoopsSelector(group) }
    }

    private func findsEachLoopsSelector(_ group: MultiThreadedEventLoopGroup) async throws {
        let loops = Array(group.makeIterator())
        var found: [CInt] = []
        for loop in loops { found.append(try #require(await EventLoopSelector.duplicateDescriptor(of: loop))) }
        let selectors = found
        defer { for selector in selectors { close(selector) } }

        let pipe = try WatchedPipe(on: loops[0])
        defer { pipe.close() }
        // While loop 0 is busy running this task it cannot read the pipe: the byte stays ready.
        let (before, after, other) = try await loops[0].submit {
            let before = Self.isReady(selectors[0])
            pipe.poke()
            return (before, Self.isReady(selectors[0]), Self.isReady(selectors[1]))
        }.get()
        #expect(!before)
        #expect(after)
        // Loop 1 may be finishing a task of its own at that moment; what matters is that the byte
        // for loop 0 did not make loop 1's descriptor ready.
        if other { #expect(!(try await loops[1].submit { Self.isReady(selectors[1]) }.get())) }
    }

    @Test("after activity the loop polls for the window and then sleeps; I/O ends the polling at once")
    func pollsForTheWindowOnly() async throws {
        try await withGroup(threads: 1) { group in try await pollsForTheWindowOnly(group) }
    }

    private func pollsForTheWindowOnly(_ group: MultiThreadedEventLoopGroup) async throws {
        let loop = group.next()
        let thread = try await loop.submit { LoopThread() }.get()

        // A 50 ms window with nothing arriving: the loop polls until the window has passed, then sleeps.
        let short = try #require(await BusyPolling.start(on: group, window: .milliseconds(50)))
        defer { short.close() }
        let shortPoller = try #require(short.poller(for: loop))
        try await loop.submit { shortPoller.noteActivity() }.get()
        let first = try #require(await finishedSpin(of: shortPoller))
        #expect(first.polls > 0)
        #expect(!first.endedByIO)
        #expect(first.sinceActivity >= 50_000_000)
        let asleep = thread.cpuNanoseconds()
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(thread.cpuNanoseconds() - asleep < 5_000_000, "the loop kept using the CPU after its window")

        // A 30 s window, but I/O arrives: the polling stops there, and the loop reads the pipe
        // (which it cannot do while it polls). The byte comes from a thread of its own, so that a
        // busy cooperative pool cannot delay it past the window.
        let long = try #require(await BusyPolling.start(on: group, window: .seconds(30)))
        defer { long.close() }
        let longPoller = try #require(long.poller(for: loop))
        let pipe = try WatchedPipe(on: loop)
        defer { pipe.close() }
        // A first byte, read as usual, shows the pipe is registered for reading before the loop polls.
        pipe.poke()
        for _ in 0..<1_000 where pipe.bytesRead == 0 { try await Task.sleep(nanoseconds: 10_000_000) }
        try #require(pipe.bytesRead == 1)
        try await loop.submit {
            longPoller.noteActivity()
            Thread.detachNewThread {
                usleep(20_000)
                pipe.poke()
            }
        }.get()
        let second = try #require(await finishedSpin(of: longPoller, within: 40))
        #expect(second.endedByIO)
        #expect(second.sinceActivity < 20_000_000_000)
        for _ in 0..<1_000 where pipe.bytesRead == 1 { try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(pipe.bytesRead == 2)
    }

    /// The poller's finished spin, waiting up to `seconds` for it.
    private func finishedSpin(of poller: LoopBusyPoller, within seconds: Int = 10) async throws -> LoopBusyPoller.Spin? {
        for _ in 0..<seconds * 100 {
            if let spin = poller.lastSpin.withLock({ $0 }) { return spin }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return nil
    }

    @Test("a zero window turns busy polling off")
    func zeroWindowIsOff() async throws {
        try await withGroup(threads: 1) { group in #expect(await BusyPolling.start(on: group, window: .zero) == nil) }
    }

    private func withGroup(threads: Int, _ body: (MultiThreadedEventLoopGroup) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        do { try await body(group) } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    static func isReady(_ selector: CInt) -> Bool {
        var descriptor = pollfd(fd: selector, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }
}

/// A pipe whose read end is a NIO channel on one loop; `poke()` writes a byte to it.
private final class WatchedPipe: Sendable {
    let channel: any Channel
    let writeEnd: CInt
    private let total = ByteCounter.Total()
    var bytesRead: Int { total.value.withLock { $0 } }

    init(on loop: any EventLoop) throws {
        var ends: [CInt] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw IOError(errnoCode: errno, reason: "pipe") }
        writeEnd = ends[1]
        let counter = total
        channel = try NIOPipeBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ByteCounter(counter)) }
            }
            .takingOwnershipOfDescriptor(input: ends[0]).wait()
    }

    func poke() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func close() {
        channel.close(promise: nil)
        _ = Glibc.close(writeEnd)
    }
}

private final class ByteCounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    final class Total: Sendable { let value = Mutex(0) }
    let total: Total
    init(_ total: Total) { self.total = total }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let count = unwrapInboundIn(data).readableBytes
        total.value.withLock { $0 += count }
    }
}

/// The thread that created it, whose CPU time can then be read from any thread.
private struct LoopThread: Sendable {
    let clock: clockid_t

    init() {
        var clock = clockid_t()
        pthread_getcpuclockid(pthread_self(), &clock)
        self.clock = clock
    }

    /// Nanoseconds the thread has run on a CPU.
    func cpuNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(clock, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
