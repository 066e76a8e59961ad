import ChaosCore
import ChaosProtocols
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ChaosProxy

/// A real proxy on 127.0.0.1 (port 0) in front of a real test listener, with its event stream kept.
final class ProxyHarness: Sendable {
    let group: MultiThreadedEventLoopGroup
    let upstream: TestListener
    let proxy: ProxyServer
    let events: EventRecorder
    let clock = RunClock()

    let busyPolling: BusyPolling?
    let epollRelay: EpollRelayLoopGroup?

    /// With `epollRelay` (as `chaos` runs), connections nothing shapes start on epollRelay
    /// threads and move to NIO when a fault reaches them; without `recordsTraffic` (as `chaos proxy` runs), the epoll
    /// relay splices their bytes.
    init(
        baseline: LinkProfile? = nil,
        maxHeldBytes: Int = 1 << 20,
        busyPoll: TimeAmount = .zero,
        epollRelay: Bool = true,
        frames: (any ProtocolPlugin.Type)? = nil,
        connectTimeout: ChaosDuration? = nil,
        upstreamBacklog: Int32 = 128,
        recordsTraffic: Bool = true,
        splice: SplicePolicy? = nil,
        deadPathInKernel: Bool = true
    ) async throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        upstream = try TestListener(backlog: upstreamBacklog)
        events = EventRecorder(recordsTraffic: recordsTraffic)
        busyPolling = await BusyPolling.start(on: group, window: busyPoll)
        self.epollRelay = epollRelay ? try EpollRelayLoopGroup(threads: 2, busyPoll: busyPoll) : nil
        var options = ProxyServer.Options()
        options.maxHeldBytes = maxHeldBytes
        options.busyPolling = busyPolling
        options.epollRelay = self.epollRelay
        options.frames = frames
        options.deadPathInKernel = deadPathInKernel
        if let connectTimeout { options.connectTimeout = connectTimeout }
        // Without recorded traffic, every byte is spliced: the splice path meets every rule the relay's tests check.
        options.splice = splice ?? (recordsTraffic ? .bulk : .always)
        proxy = ProxyServer(
            spec: ProxySpec(
                name: "test",
                listen: HostPort(host: "127.0.0.1", port: 0),
                upstream: HostPort(host: "127.0.0.1", port: upstream.port)
            ),
            group: group,
            sink: events,
            clock: clock,
            ids: ConnectionIDSource(),
            seed: SeededGenerator(seed: 7),
            baseline: baseline,
            options: options
        )
        try await proxy.start()
    }

    var port: Int { proxy.boundAddress?.port ?? 0 }

    /// Connects a client through the proxy and accepts the server side.
    func connectPair() throws -> (client: TestSocket, server: TestSocket) {
        let client = try TestSocket.connect(port: port)
        let server = try upstream.accept()
        return (client, server)
    }

    /// Waits until the proxy has `count` live connections; throws (failing the test) after 5 s.
    func waitForConnections(_ count: Int) async throws {
        try await waitUntil("\(count) live connections (have \(proxy.liveConnections.count))") {
            proxy.liveConnections.count == count
        }
    }

    func shutdown() async {
        await proxy.stop()
        upstream.close()
        epollRelay?.shutdown()
        try? await group.shutdownGracefully()
        busyPolling?.close()
    }
}

/// Keeps every event the proxy reports (with `recordsTraffic` false, as a `chaos proxy` without an audit: connection
/// and fault events only, so the epoll relay splices).
final class EventRecorder: TrafficEventSink {
    let recordsTraffic: Bool
    init(recordsTraffic: Bool = true) { self.recordsTraffic = recordsTraffic }
    private let events = Mutex<[TrafficEvent]>([])
    /// Called with each event as it is recorded, on the recording thread (what else held at that moment).
    let observer = Mutex<(@Sendable (TrafficEvent) -> Void)?>(nil)
    func record(_ event: TrafficEvent) {
        observer.withLock { $0 }?(event)
        events.withLock { $0.append(event) }
    }
    var all: [TrafficEvent] { events.withLock { $0 } }

    /// Every `.closed` event of `side`.
    func closes(_ side: Side) -> [TrafficEvent.CloseKind] {
        all.compactMap { if case .closed(side, let kind) = $0.kind { kind } else { nil } }
    }
}

/// A deterministic byte pattern: a random 64 KiB block repeated, each copy stamped with its
/// index, so a lost, duplicated, reordered or changed byte shows.
func pattern(count: Int, seed: UInt64) -> [UInt8] {
    var generator = SeededGenerator(seed: seed)
    let blockSize = 65536
    var block = [UInt8](repeating: 0, count: blockSize)
    for index in stride(from: 0, to: blockSize, by: 8) {
        withUnsafeBytes(of: generator.next()) { block.replaceSubrange(index..<index + 8, with: $0) }
    }
    var bytes = [UInt8]()
    bytes.reserveCapacity(count)
    var copy: UInt64 = 0
    while bytes.count < count {
        withUnsafeBytes(of: copy) { block.replaceSubrange(0..<8, with: $0) }
        bytes.append(contentsOf: block.prefix(count - bytes.count))
        copy += 1
    }
    return bytes
}

/// Whether two byte arrays are equal (memcmp: fast even in debug builds).
func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, a.count) == 0 } }
}

/// Expects `got` to be `expected`; a failure names the sizes and the first difference rather
/// than printing megabytes of both.
func expectSameBytes(
    _ got: [UInt8],
    _ expected: [UInt8],
    _ what: String = "bytes",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let same = sameBytes(got, expected)
    let difference = same ? -1 : (0..<min(got.count, expected.count)).first { got[$0] != expected[$0] } ?? min(got.count, expected.count)
    #expect(
        same,
        "\(what): got \(got.count) bytes, expected \(expected.count); first difference at \(difference)",
        sourceLocation: sourceLocation
    )
}

/// A condition a test waited for never came.
struct ConditionNeverCame: Error, CustomStringConvertible {
    let what: String
    var description: String { "never came within the time allowed: \(what)" }
}

/// Polls `condition` every 10 ms; throws ``ConditionNeverCame`` (failing the test) when it still does
/// not hold after `seconds`.
func waitUntil(_ what: @autoclosure () -> String, seconds: Double = 5, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        guard ContinuousClock.now < deadline else { throw ConditionNeverCame(what: what()) }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
}
