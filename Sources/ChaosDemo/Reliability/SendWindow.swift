package import ChaosCore
package import Foundation
import NIOCore

/// `--send-for` and `--send-until`: how long a side of the reference pair produces new messages (then only heartbeats
/// and acknowledgements), shared by the client's and the server's producers.
package struct SendWindow {
    /// When producing ends; nil: never.
    let until: NIODeadline?

    /// A window that ends `sendFor` from now or at the wall-clock moment `sendUntil`, whichever comes first (neither:
    /// open until stopped). A moment suits processes that must go quiet together (a fleet's pair, started one after
    /// another on a loaded machine): a length counts from each one's own start.
    package init(sendFor: ChaosDuration?, sendUntil: Date? = nil) {
        let now = NIODeadline.now()
        let ends = [
            sendFor.map { now + .nanoseconds($0.nanoseconds) },
            sendUntil.map { now + .nanoseconds(Int64(max(0, $0.timeIntervalSinceNow * 1e9).rounded())) },  // a moment past: closed
        ]
        until = ends.compactMap { $0 }.min()
    }

    /// Whether new messages may still be produced.
    package var isOpen: Bool { until.map { NIODeadline.now() < $0 } ?? true }

    /// How long producing goes on from now (zero once it ended); nil: until stopped.
    package var timeLeft: ChaosDuration? {
        until.map { .nanoseconds(max(0, Int64($0.uptimeNanoseconds) - Int64(NIODeadline.now().uptimeNanoseconds))) }
    }
}
