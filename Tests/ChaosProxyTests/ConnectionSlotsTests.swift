import Testing

@testable import ChaosControl

/// The control API's connection slots as a table, without sockets.
@Suite("Control API connection slots")
struct ConnectionSlotsTests {
    @Test("under capacity every connection is admitted")
    func underCapacity() {
        var slots = ConnectionSlots<Int>(capacity: 3)
        #expect([1, 2, 3].map { slots.admit($0) } == [.admit, .admit, .admit])
        #expect(slots.count == 3)
    }

    @Test("at capacity the connection that waited longest gives its place, whether it never sent or was kept alive")
    func evictsLongestWaiting() {
        var slots = ConnectionSlots<Int>(capacity: 3)
        for key in 1...3 { _ = slots.admit(key) }
        #expect(slots.admit(4) == .admitEvicting(1))
        // 2 is answered, then kept alive: it now waited less than 3.
        slots.beginAnswering(2)
        slots.endAnswering(2)
        #expect(slots.admit(5) == .admitEvicting(3))
        #expect(slots.admit(6) == .admitEvicting(4))
        #expect(slots.count == 3)
    }

    @Test("a connection being answered is never evicted; when all are, the new one is refused")
    func busyAreKept() {
        var slots = ConnectionSlots<Int>(capacity: 2)
        _ = slots.admit(1)
        _ = slots.admit(2)
        slots.beginAnswering(1)
        #expect(slots.admit(3) == .admitEvicting(2))
        slots.beginAnswering(3)
        #expect(slots.admit(4) == .refuse)
        slots.remove(1)
        #expect(slots.admit(4) == .admit)
    }

    @Test("a closed connection frees its slot; ending an unknown one changes nothing")
    func removal() {
        var slots = ConnectionSlots<Int>(capacity: 1)
        _ = slots.admit(1)
        slots.remove(1)
        slots.endAnswering(1)
        #expect(slots.count == 0)
        #expect(slots.admit(2) == .admit)
    }
}
