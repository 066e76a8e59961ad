package import ChaosCore
package import NIOCore

/// Receives the proxy's ``TrafficEvent``s. Called on the proxy's event loops and relay threads, inline: keep it
/// fast (hand the event over); a sink that cannot keep up holds the proxy back (real backpressure, never an
/// unbounded queue).
package protocol TrafficEventSink: Sendable {
    /// Records one event.
    func record(_ event: TrafficEvent)

    /// Whether the sink wants the bytes (`read` and `written` events) and each connection's
    /// addresses; when false only connection and fault events are sent, which spares the relay a
    /// copy per read and write and the address lookups per connection. Read once per connection.
    var recordsTraffic: Bool { get }
}

extension TrafficEventSink {
    /// By default a sink gets everything.
    package var recordsTraffic: Bool { true }

    /// Records the end of UDP flow `id` at `time`: both its sides closed, as `how` says (a flow has no FIN of its own).
    func recordFlowEnded(_ id: ConnectionID, at time: Int64, how: TrafficEvent.CloseKind) {
        for side in [Side.client, .server] { record(TrafficEvent(time: time, connection: id, kind: .closed(side, how))) }
    }
}

/// The run's monotonic clock: nanoseconds since the run started.
package struct RunClock: Sendable {
    /// The uptime at the start of the run.
    package let start: NIODeadline

    /// A clock that starts now.
    package init() { start = .now() }

    /// A clock that started at `start`.
    package init(start: NIODeadline) { self.start = start }

    /// Nanoseconds since the start.
    package func now() -> Int64 { Int64(NIODeadline.now().uptimeNanoseconds) - Int64(start.uptimeNanoseconds) }

    /// The deadline `offset` after the start.
    package func deadline(after offset: ChaosDuration) -> NIODeadline {
        start + .nanoseconds(offset.nanoseconds)
    }
}
