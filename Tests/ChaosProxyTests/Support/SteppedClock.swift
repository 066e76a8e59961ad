import ChaosProxy
import Synchronization

/// A fault clock whose time moves only when the test moves it: a fault injector on it begins and ends each fault (and
/// each phase of one, such as a handoff's dead WiFi and blackout) when the test says, however long a loaded machine
/// holds the test's thread between two steps.
final class SteppedClock: FaultClock {
    private let time: Mutex<Int64>

    init(at start: Int64 = 0) { time = Mutex(start) }

    func now() -> Int64 { time.withLock { $0 } }

    /// Moves the time on to `target` (nanoseconds); never back.
    func advance(to target: Int64) { time.withLock { $0 = max($0, target) } }

    func sleep(until target: Int64) async throws {
        while now() < target { try await Task.sleep(nanoseconds: 2_000_000) }
    }
}
