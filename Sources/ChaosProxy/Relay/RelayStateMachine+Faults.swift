import ChaosCore

/// The faults that act on the bytes a connection reads or after a time, rather than by shaping a direction
/// (Toxiproxy's `limit_data`, `reset_peer` and the end of a `timeout`): their rules, whose state is
/// ``RelayStateMachine/byteFaults``. The relay performs the ``FaultAction``s they return, in order.
extension RelayStateMachine {
    /// One such fault on the connection.
    struct ByteFault: Sendable, Equatable {
        var effect: FaultEffect
        /// Bytes it let pass its way (limit_data).
        var passed: Int64 = 0
        /// Its timer is running (reset_peer once bytes came its way, timeout from the start).
        var timed = false
    }

    /// What a relay must do for these faults, in the order given.
    enum FaultAction: Sendable, Equatable {
        /// After `delay`, tell the machine ``faultTimerExpired(_:)`` for `key`.
        case scheduleTimer(ShapingKey, ChaosDuration)
        /// Forget `key`'s timer.
        case cancelTimer(ShapingKey)
        /// A timeout ran out: drop what every leg holds, then lift its shaping (so that the FIN that follows
        /// is not held behind it).
        case endTimeout(ShapingKey)
        /// The connection's own actions (a cut).
        case relay([Action])
    }

    /// What may pass of bytes just read, and what to do once they have been handed on.
    struct ReadVerdict: Sendable, Equatable {
        /// How many of them may pass (the first ones).
        var allowed: Int
        /// To do now (a timer to start).
        var actions: [FaultAction] = []
        /// A limit was reached: close both legs once the bytes allowed were handed on.
        var closeAfter = false
    }

    /// A fault reached the connection (again: nothing changes). A timeout's timer starts now.
    mutating func faultAdded(_ effect: FaultEffect, key: ShapingKey) -> [FaultAction] {
        guard phase == .relaying, !isCut, byteFaults[key] == nil else { return [] }
        switch effect {
        case .limitData, .resetPeer:
            byteFaults[key] = ByteFault(effect: effect)
            return []
        case .timeout(let after?, _):
            byteFaults[key] = ByteFault(effect: effect, timed: true)
            return [.scheduleTimer(key, after)]
        default:
            return []
        }
    }

    /// The fault named `key` was lifted.
    mutating func faultRemoved(_ key: ShapingKey) -> [FaultAction] {
        guard let fault = byteFaults.removeValue(forKey: key) else { return [] }
        return fault.timed ? [.cancelTimer(key)] : []
    }

    /// `count` bytes were read from `side`. limit_data lets pass what its limit still allows and, once the limit
    /// is reached, closes both legs (after what passed). reset_peer, as Toxiproxy's, swallows the first bytes
    /// that come its way and every byte after, and resets both legs `after` those first bytes.
    mutating func read(_ count: Int, from side: Side) -> ReadVerdict {
        var verdict = ReadVerdict(allowed: count)
        let direction = side.producing
        for key in byteFaults.keys.sorted() {
            switch byteFaults[key]!.effect {
            case .limitData(let bytes, let way) where way.contains(direction):
                let remaining = max(0, bytes - byteFaults[key]!.passed)
                verdict.allowed = min(verdict.allowed, Int(clamping: remaining))
                if remaining <= Int64(count) { verdict.closeAfter = true }
                byteFaults[key]!.passed += min(remaining, Int64(count))
            case .resetPeer(let after, let way) where way.contains(direction):
                verdict.allowed = 0
                if !byteFaults[key]!.timed {
                    byteFaults[key]!.timed = true
                    verdict.actions.append(.scheduleTimer(key, after))
                }
            default:
                continue
            }
        }
        return verdict
    }

    /// The timer of the fault named `key` ran out: a timeout drops what was held and closes both legs (FIN), a
    /// reset_peer resets them.
    mutating func faultTimerExpired(_ key: ShapingKey) -> [FaultAction] {
        guard let fault = byteFaults.removeValue(forKey: key), fault.timed else { return [] }
        switch fault.effect {
        case .timeout: return [.endTimeout(key), .relay(cut(.close, linger: Self.faultLinger))]
        case .resetPeer: return [.relay(cut(.reset, linger: Self.faultLinger))]
        default: return []
        }
    }

    /// How long a leg these faults close waits for its peer's FIN before it is reset.
    static let faultLinger = ChaosDuration.seconds(Int64(5))
}
