import ChaosCore
import Glibc
import Testing

@testable import ChaosProxy

/// One suite for both relays, generated from the relay state machine's events: every playable
/// history of one or two wire steps (bytes, FIN, RST from either peer, each cut, the proxy
/// stopping) and a few orderly ends is played against the NIO relay (EmbeddedChannel, virtual
/// time) and the epoll relay (real loopback sockets: a socketpair carries neither a RST nor TCP
/// acknowledgements). After every step each peer must see what ``RelayStateMachine`` says (the
/// bytes, a FIN, a reset or nothing) and the proxy must have recorded the closes it says, so the
/// two relays agree with the machine and with each other.
@Suite("Relay conformance: both relays do what the state machine's events say", .serialized, .timeLimit(.minutes(5)))
struct RelayConformanceTests {
    @Test("the generated histories cover every wire step, first and second")
    func coverage() {
        let histories = ConformanceHistory.all
        for step in WireStep.allCases {
            #expect(histories.contains { $0.steps.first == step }, "\(step) first")
            #expect(histories.contains { $0.steps.count > 1 && $0.steps[1] == step }, "\(step) second")
        }
        #expect(histories.count > 80)
    }

    /// Each leg's close is recorded once, but for a FIN cut, or its peer's own FIN, that its peer then answers with a
    /// RST (its socket closed with bytes unread), and a peer's own FIN that the proxy then resets (a reset passed on,
    /// a fault's, the stop's): the cut or the FIN, then that reset, as a capture of the leg sees them.
    static func recordedOnce(_ closes: [TrafficEvent.CloseKind], _ history: ConformanceHistory) -> Bool {
        let text = "\(history)"
        let resetAfter = text.contains("RST") || text.contains("cut") || text.contains("stops")
        return closes.count <= 1 || (closes == [.cutByFault, .reset] && text.contains("cut close"))
            || ([[.fin, .reset], [.fin, .resetByFault]].contains(closes) && text.contains("FIN") && resetAfter)
    }

    @Test("the NIO relay on EmbeddedChannels", arguments: ConformanceHistory.all)
    func nio(history: ConformanceHistory) throws {
        let relay = try EmbeddedRelay()
        defer { relay.finish() }
        for (index, step) in history.steps.enumerated() {
            relay.play(step)
            #expect(relay.views == history.expected[index], "after \(step) (step \(index + 1))")
        }
        for side in Side.allCases { #expect(Self.recordedOnce(relay.events.closes(side), history), "\(side): \(relay.events.closes(side))") }
        for side in Side.allCases where "\(history)" == "cut close, \(side) RST" {
            #expect(relay.events.closes(side) == [.cutByFault, .reset], "the peer's answering reset is recorded: \(relay.events.closes(side))")
        }
    }

    @Test(
        "the epoll relay on loopback sockets, its bytes read and written (recorded) and spliced (nothing records them)",
        arguments: ConformanceHistory.all,
        [true, false]
    )
    func epoll(history: ConformanceHistory, recordsTraffic: Bool) async throws {
        let harness = try await ProxyHarness(recordsTraffic: recordsTraffic)
        let (client, server) = try await offPool { try harness.connectPair() }
        try await waitUntil("the connection open on the epoll relay") {
            harness.proxy.epollRelayConnections.count == 1 && harness.events.all.contains { if case .opened = $0.kind { true } else { false } }
        }
        let peers = [WirePeer(client), WirePeer(server)]
        for (index, step) in history.steps.enumerated() {
            switch step {
            case .clientSends, .serverSends: try? peers[step.actor!.slot].socket.sendAll(WireStep.payload(from: step.actor!))
            case .clientFIN, .serverFIN: peers[step.actor!.slot].socket.shutdownWrite()
            case .clientReset, .serverReset: peers[step.actor!.slot].resetItself()
            case .terminate: await harness.proxy.stop()
            default: await harness.proxy.disconnect(nil, mode: step.cutMode!, linger: .seconds(Int64(30)))
            }
            func views() -> [PeerView] {
                Side.allCases.map { side in
                    var view = peers[side.slot].observe()
                    view.recorded = harness.events.closes(side).last
                    return view
                }
            }
            do {
                try await waitUntil("after \(step) (step \(index + 1))") { views() == history.expected[index] }
            } catch {
                #expect(views() == history.expected[index], "after \(step) (step \(index + 1))")
                break
            }
        }
        for side in Side.allCases { #expect(Self.recordedOnce(harness.events.closes(side), history), "\(side): \(harness.events.closes(side))") }
        for side in Side.allCases where "\(history)" == "cut close, \(side) RST" {
            #expect(harness.events.closes(side) == [.cutByFault, .reset], "the peer's answering reset is recorded: \(harness.events.closes(side))")
        }
        // Spliced, every byte relayed went socket to socket; recorded, none did.
        let counters = harness.proxy.counters
        #expect(counters.spliced == (recordsTraffic ? 0 : counters.upstream + counters.downstream), "spliced \(counters.spliced)")
        client.close()
        server.close()
        await harness.shutdown()
    }
}

/// A real peer's view of its socket, read without blocking: the bytes so far, and how the stream ended.
final class WirePeer: @unchecked Sendable {
    // Sendable: used by one test task at a time.
    let socket: TestSocket
    private var view = PeerView()

    init(_ socket: TestSocket) { self.socket = socket }

    /// The peer resets its own socket: it sees nothing more.
    func resetItself() {
        _ = observe()
        socket.reset()
        if view.end != .reset { view.end = .gone }
    }

    /// Reads what has arrived. A reset after a FIN shows only as the socket's pending error.
    func observe() -> PeerView {
        guard view.end != .gone, view.end != .reset else { return view }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while view.end == .open {
            let count = buffer.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                view.received += buffer[0..<count]
            } else if count == 0 {
                view.end = .fin
            } else {
                if errno != EAGAIN, errno != EWOULDBLOCK { view.end = .reset }
                break
            }
        }
        if view.end == .fin {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(socket.fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { view.end = .reset }
        }
        return view
    }
}
