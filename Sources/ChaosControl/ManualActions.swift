package import ChaosCore
package import ChaosProxy
import Synchronization

/// What people did to a running run through its control API (``ManualAction``), in order, for its report.
package final class ManualActions: Sendable {
    private let list = Mutex<[ManualAction]>([])
    /// The run clock, whose seconds the actions are stamped with.
    private let clock: any FaultClock

    /// An empty log on `clock`.
    package init(clock: any FaultClock) { self.clock = clock }

    /// Records `action` now.
    package func record(_ action: ManualAction.Kind, _ detail: String? = nil) {
        let at = Double(clock.now()) / 1e9
        list.withLock { $0.append(ManualAction(atS: at, action: action, detail: detail)) }
    }

    /// Every action so far.
    package var all: [ManualAction] { list.withLock { $0 } }
}
