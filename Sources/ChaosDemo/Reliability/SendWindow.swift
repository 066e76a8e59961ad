import ChaosCore
import NIOCore

/// `--send-for`: how long a side of the reference pair produces new messages (then only heartbeats and
/// acknowledgements), shared by the client's and the server's producers.
struct SendWindow {
    /// When producing ends; nil: never.
    let until: NIODeadline?

    /// A window `sendFor` long from now (nil: open until stopped).
    init(sendFor: ChaosDuration?) {
        until = sendFor.map { .now() + .nanoseconds($0.nanoseconds) }
    }

    /// Whether new messages may still be produced.
    var isOpen: Bool { until.map { NIODeadline.now() < $0 } ?? true }
}
