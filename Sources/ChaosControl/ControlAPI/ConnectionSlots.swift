/// The control API's connection slots: at most `capacity` connections at once, and fair to a real client
/// when slow ones fill them. A connection is *busy* while its request is being answered and *waiting*
/// otherwise (its request not yet whole, or kept alive between requests). When a new connection finds
/// every slot taken, it takes the place of the connection that has waited longest: a client that sends
/// its request at once is answered, however many connections sit on half a request. Only when every slot
/// is busy is the new connection refused.
///
/// A state machine over connection keys: it returns what to do and closes nothing itself.
struct ConnectionSlots<Key: Hashable> {
    /// What to do with a new connection.
    enum Admission: Equatable {
        /// Serve it.
        case admit
        /// Serve it, and close `Key`'s connection, which waited longest.
        case admitEvicting(Key)
        /// Close it at once: every slot is answering a request.
        case refuse
    }

    private struct Slot {
        var busy = false
        /// When it began to wait (an ever-growing count, not a time): the smallest waited longest.
        var waitingSince: UInt64
    }

    let capacity: Int
    private var slots: [Key: Slot] = [:]
    private var clock: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    /// How many connections hold a slot.
    var count: Int { slots.count }

    /// A new connection arrived.
    mutating func admit(_ key: Key) -> Admission {
        var evicted: Key?
        if slots.count >= capacity {
            guard let oldest = slots.filter({ !$0.value.busy }).min(by: { $0.value.waitingSince < $1.value.waitingSince })?.key else {
                return .refuse
            }
            slots.removeValue(forKey: oldest)
            evicted = oldest
        }
        slots[key] = Slot(waitingSince: tick())
        return evicted.map { .admitEvicting($0) } ?? .admit
    }

    /// Its request arrived whole: it is answered, and cannot be evicted until it waits again.
    mutating func beginAnswering(_ key: Key) { slots[key]?.busy = true }

    /// Its answer went out; it waits for the next request (kept alive).
    mutating func endAnswering(_ key: Key) {
        guard slots[key] != nil else { return }
        slots[key] = Slot(waitingSince: tick())
    }

    /// The connection closed (or was evicted): its slot is free.
    mutating func remove(_ key: Key) { slots.removeValue(forKey: key) }

    private mutating func tick() -> UInt64 {
        clock += 1
        return clock
    }
}

extension ConnectionSlots: Sendable where Key: Sendable {}
