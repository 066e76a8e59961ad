package import ChaosCore

/// What a ``FaultInjector`` acts on: a proxy (``ProxyServer``), or in tests a recorder that keeps what it
/// was asked to do and when.
package protocol FaultTarget: AnyObject, Sendable {
    /// The proxy's name (a rule's `proxy:` picks it).
    var name: String { get }
    /// The connections live now.
    var liveConnections: [ConnectionID] { get }
    /// Connections established so far (it only grows): a fault that lasts tells from it the connections opened while
    /// it was on, which it reached too when it reaches new connections.
    var connectionsOpened: Int64 { get }
    /// Picks the connections an occurrence hits among the live ones, from its seed.
    func pickTargets(_ targets: Targets, seed: UInt64) -> [ConnectionID]
    /// Cuts the given connections (all when nil); returns how many it cut.
    func disconnect(_ ids: [ConnectionID]?, mode: DisconnectMode, linger: ChaosDuration) async -> Int
    /// Sends the given connections (all when nil) a protocol frame of the proxy's own at a frame boundary (a
    /// WebSocket close, an HTTP/2 GOAWAY) and closes them after the effect's grace time; returns how many it
    /// reached (only connections whose frames the proxy follows can be reached).
    func protocolClose(_ ids: [ConnectionID]?, _ fault: ProtocolFault) async -> Int
    /// A protocol fault that lasts lies in wait on every connection, live and new, under `key`; returns how many live
    /// ones it lies in wait on.
    func beginWaitingFault(_ fault: ProtocolFault, key: ShapingKey) async -> Int
    /// The fault under `key` no longer lies in wait; returns how many connections it caught.
    func endWaitingFault(key: ShapingKey) async -> Int
    /// Shapes the given connections (all, now and new, when nil: each that `draw` reaches, when given); returns
    /// how many live ones it reached.
    func addShaping(_ effect: FaultEffect, key: ShapingKey, to ids: [ConnectionID]?, draw: ConnectionDraw?) async -> Int
    /// Lifts the shaping named `key`.
    func removeShaping(key: ShapingKey) async
    /// Stops accepting (clients get ECONNREFUSED); nested calls are counted.
    func beginRefusing() async
    /// Accepts again once every refusal has ended.
    func endRefusing() async
    /// New TLS handshakes hang or fail (`mode`) until the matching ``endHandshakeFault(_:)``; nested calls are
    /// counted. A proxy without TLS ignores it.
    func beginHandshakeFault(_ mode: HandshakeMode)
    /// Ends one ``beginHandshakeFault(_:)``; stalled handshakes go on once no stall is left.
    func endHandshakeFault(_ mode: HandshakeMode)
    /// The link profile new connections start with from now on.
    func setBaseline(_ profile: LinkProfile?)
    /// New upstream connections come from the next address of `pool` (a handoff with `new_address`); returns it.
    func changeSourceAddress(pool: [String]) -> String?
    /// The given UDP flows (all when nil) continue from a new upstream-facing port (a NAT rebinding); returns how many.
    func rebindFlows(_ ids: [ConnectionID]?) async -> Int
}

/// The time a ``FaultInjector`` runs on: the run's clock, or in tests a virtual one that a sleep
/// advances at once.
package protocol FaultClock: Sendable {
    /// Nanoseconds since the run began.
    func now() -> Int64
    /// Returns at `time` (nanoseconds since the run began), or at once when it has passed; throws when
    /// the task is cancelled.
    func sleep(until time: Int64) async throws
}

extension FaultTarget {
    /// A target that follows no protocol's frames: a lasting protocol fault finds nothing to wait on.
    package func beginWaitingFault(_ fault: ProtocolFault, key: ShapingKey) async -> Int { 0 }
    package func endWaitingFault(key: ShapingKey) async -> Int { 0 }
    /// A target with no UDP flows rebinds none.
    package func rebindFlows(_ ids: [ConnectionID]?) async -> Int { 0 }

    /// Shapes the given connections (all, now and new, when nil); returns how many live ones it reached.
    @discardableResult
    package func addShaping(_ effect: FaultEffect, key: ShapingKey, to ids: [ConnectionID]?) async -> Int {
        await addShaping(effect, key: key, to: ids, draw: nil)
    }
}

extension RunClock: FaultClock {
    package func sleep(until time: Int64) async throws {
        let wait = time.subtractingReportingOverflow(now())
        if !wait.overflow, wait.partialValue > 0 { try await Task.sleep(nanoseconds: UInt64(wait.partialValue)) }
        try Task.checkCancellation()
    }
}

extension ProxyServer: FaultTarget {
    package var name: String { spec.name }
    package var connectionsOpened: Int64 { counters.opened }
}
