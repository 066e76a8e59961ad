import ChaosCore
import Testing

@testable import ChaosProxy

/// The relay state machine's rules for faults that act on bytes read or after a time (limit_data, reset_peer,
/// timeout), without sockets or clocks: what each event returns.
@Suite("Relay state machine: limit_data, reset_peer, timeout")
struct RelayStateMachineFaultTests {
    typealias Machine = RelayStateMachine
    static let key = ShapingKey(timeline: 1, occurrence: 0)

    @Test("limit_data counts what passes its way since it arrived, cuts the read that reaches it, then closes")
    func limitData() {
        var machine = Machine(connected: true)
        #expect(machine.faultAdded(.limitData(bytes: 10, direction: .downstream), key: Self.key).isEmpty)
        #expect(machine.read(100, from: .client) == .init(allowed: 100))  // the other way
        #expect(machine.read(6, from: .server) == .init(allowed: 6))
        #expect(machine.read(6, from: .server) == .init(allowed: 4, closeAfter: true))
        #expect(machine.read(6, from: .server) == .init(allowed: 0, closeAfter: true))
    }

    @Test("reset_peer swallows its way's bytes from the first, starts its timer once, and resets both legs when it runs out")
    func resetPeer() {
        var machine = Machine(connected: true)
        #expect(machine.faultAdded(.resetPeer(after: .milliseconds(20), direction: .upstream), key: Self.key).isEmpty)
        #expect(machine.read(5, from: .server) == .init(allowed: 5))
        #expect(machine.read(5, from: .client) == .init(allowed: 0, actions: [.scheduleTimer(Self.key, .milliseconds(20))]))
        #expect(machine.read(5, from: .client) == .init(allowed: 0))
        let actions = machine.faultTimerExpired(Self.key)
        guard case .relay(let cut)? = actions.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(cut.filter { if case .reset = $0 { true } else { false } }.count == 2)
        #expect(machine.isCutByFault)
    }

    @Test("a timeout starts its timer when it arrives; when it runs out the hold ends and both legs get a FIN")
    func timeout() {
        var machine = Machine(connected: true)
        #expect(
            machine.faultAdded(.timeout(after: .milliseconds(300), direction: .upstream), key: Self.key)
                == [.scheduleTimer(Self.key, .milliseconds(300))]
        )
        #expect(machine.faultAdded(.timeout(after: .milliseconds(300), direction: .upstream), key: Self.key).isEmpty)  // again
        let actions = machine.faultTimerExpired(Self.key)
        #expect(actions.first == .endTimeout(Self.key))
        guard case .relay(let cut)? = actions.last else {
            Issue.record("\(actions)")
            return
        }
        #expect(cut.contains(.sendFIN(.client)) && cut.contains(.sendFIN(.server)))
        #expect(machine.faultTimerExpired(Self.key).isEmpty)
    }

    @Test("a timeout of 0 holds with no timer; a lifted fault's timer is cancelled and never fires")
    func liftAndForever() {
        var machine = Machine(connected: true)
        #expect(machine.faultAdded(.timeout(after: nil, direction: .upstream), key: Self.key).isEmpty)
        let other = ShapingKey(timeline: 2, occurrence: 0)
        _ = machine.faultAdded(.timeout(after: .seconds(Int64(1)), direction: .downstream), key: other)
        #expect(machine.faultRemoved(other) == [.cancelTimer(other)])
        #expect(machine.faultTimerExpired(other).isEmpty)
        #expect(machine.byteFaults.isEmpty)
    }

    @Test("nothing is added to a connection already cut")
    func afterCut() {
        var machine = Machine(connected: true)
        _ = machine.cut(.reset, linger: .zero)
        #expect(machine.faultAdded(.timeout(after: .seconds(Int64(1)), direction: .upstream), key: Self.key).isEmpty)
        #expect(machine.byteFaults.isEmpty)
    }
}
