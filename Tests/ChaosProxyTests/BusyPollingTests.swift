@testable import ChaosProxy
import Foundation
import Glibc
import NIOCore
import NIOPosix
import Synchronization
import Testing

@Suite("Busy polling of the relay loops", .serialized, .timeLimit(.minutes(1)))
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
        #expect(!other)
    }

    @Test("after activity the loop polls for the window and then sleeps; I/O ends the polling at once")
    func pollsForTheWindowOnly() async throws {
        try await withGroup(threads: 1) { group in try await pollsForTheWindowOnly(group) }
    }

    private func pollsForTheWindowOnly(_ group: MultiThreadedEventLoopGroup) async throws {
        let loop = group.next()
        let thread = try await loop.submit { LoopThread() }.get()

        // A 50 ms window with nothing arriving: the thread stays on the CPU, then goes to sleep.
        let short = try #require(await BusyPolling.start(on: group, window: .milliseconds(50)))
        defer { short.close() }
        let start = thread.cpuNanoseconds()
        try await loop.submit { short.poller(for: loop)?.noteActivity() }.get()
        try await Task.sleep(nanoseconds: 300_000_000)
        let polled = thread.cpuNanoseconds() - start
        try await Task.sleep(nanoseconds: 300_000_000)
        let afterwards = thread.cpuNanoseconds() - start - polled
        #expect(polled >= 2_000_000, "the loop used \(polled) ns of CPU in a 50 ms polling window")
        #expect(afterwards < 2_000_000, "the loop used \(afterwards) ns of CPU after its window")

        // A 5 s window, but I/O arrives after 50 ms: the polling stops there.
        let long = try #require(await BusyPolling.start(on: group, window: .seconds(5)))
        defer { long.close() }
        let pipe = try WatchedPipe(on: loop)
        defer { pipe.close() }
        let before = thread.cpuNanoseconds()
        try await loop.submit { long.poller(for: loop)?.noteActivity() }.get()
        try await Task.sleep(nanoseconds: 50_000_000)
        pipe.poke()
        try await Task.sleep(nanoseconds: 200_000_000)
        let settled = thread.cpuNanoseconds()
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(thread.cpuNanoseconds() - settled < 2_000_000, "the loop kept polling after I/O arrived")
        #expect(settled - before < 1_000_000_000, "the loop polled \(settled - before) ns although I/O arrived after 50 ms")
        #expect(pipe.bytesRead == 1)
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
