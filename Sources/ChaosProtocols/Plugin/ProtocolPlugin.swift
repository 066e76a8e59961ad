package import ChaosCore

/// One protocol chaos understands, as a plug-in: one type per protocol, listed once in ``ProtocolRegistry``.
///
/// A plug-in gives its framing names; for the audit, a per-connection session that makes the decoder of each
/// connection leg; and, for a protocol whose frames the proxy follows (``frames``), the tracker of its frame
/// boundaries, its own faults (``FramingTraits/faults``: `ws-close`, `goaway`) and the frames they put in between two
/// frames. Nothing outside
/// the registry and the plug-ins switches over protocols: the audit and the proxy ask the plug-in.
package protocol ProtocolPlugin: FramingTraits {
    /// The named counters its events add to (`upgrades`, `pings`, `calls`).
    static var counters: [ProtocolCounter] { get }
    /// Its families of counts by code (`closeCodes`: `1000`, `1012`; `goaways`: `NO_ERROR`), total and per fault.
    static var counterFamilies: [ProtocolCounter] { get }
    /// The audit's part for `spec`: what makes each connection's session and its legs' decoders. `auditedMethods`:
    /// the RPCs audited (nil: every one). Throws `ChaosError.badInput` for options it cannot read.
    static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer
    /// This protocol's fuzz target (`chaos-fuzz`, corpus `Fuzz/corpus/NAME/`): from a fuzzer's input, the spec, the
    /// events every connection starts with (a handshake) and the bytes left. nil: it has none.
    static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup?
    /// A tracker of the frame boundaries in the bytes `producer` writes (only asked when ``frames`` is set).
    static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking
    /// The frames `fault` puts in, when it is one of this protocol's faults (``FramingTraits/faults``; nil otherwise).
    /// `connection` makes a client's masking key; `client` is the tracker of the client's bytes (HTTP/2: the streams
    /// it opened).
    static func faultFrames(_ fault: ProtocolFault, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames?
    /// For a fault that lasts (``ProtocolFaultDeclaration/lasting``): whether a connection it lies in wait on is caught
    /// now, after the client's latest bytes (`client` and `server`: the trackers of what each writes); the fault's
    /// frames are then put in (``faultFrames(_:connection:client:)``). Asked after each read of the client's bytes
    /// while the fault lasts.
    static func catches(_ fault: ProtocolFault, client: any FrameBoundaryTracking, server: any FrameBoundaryTracking) -> Bool
    /// For a fault that happens at an instant but whose effect outlives it (a restarted server forgets the sessions it
    /// had, whichever connection names one next): the fault that lies in wait, from the strike to the run's end, on every
    /// connection live and new, caught as ``catches(_:client:server:)`` says; `struck`: the trackers of the client
    /// bytes of the connections it struck. Nil: none.
    static func lingering(_ fault: ProtocolFault, struck: [any FrameBoundaryTracking]) -> ProtocolFault?
    /// Whether a request the client wrote awaits its answer (`client` and `server`: the trackers of what each
    /// writes), for an insert that answers one (``FaultFrames/Insert/answersARequest``).
    static func awaitsAnswer(client: any FrameBoundaryTracking, server: any FrameBoundaryTracking) -> Bool
    /// Where the audit reads a message's fields (`seq`, `stream`, `ack`, …) in the messages this protocol's decoders
    /// hand over: `spec` itself, or its paths rewritten when the decoders present messages in a shape of their own
    /// (SSE: the event's own fields next to its data).
    static func fieldSpec(_ spec: ProtocolSpec) -> ProtocolSpec
}

extension ProtocolPlugin {
    package static var counters: [ProtocolCounter] { [] }
    package static var counterFamilies: [ProtocolCounter] { [] }
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? { nil }
    package static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking { NoFrameBoundaries() }
    package static func faultFrames(_ fault: ProtocolFault, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames? { nil }
    package static func catches(_ fault: ProtocolFault, client: any FrameBoundaryTracking, server: any FrameBoundaryTracking) -> Bool {
        false
    }
    package static func lingering(_ fault: ProtocolFault, struck: [any FrameBoundaryTracking]) -> ProtocolFault? { nil }
    package static func awaitsAnswer(client: any FrameBoundaryTracking, server: any FrameBoundaryTracking) -> Bool { true }
    package static func fieldSpec(_ spec: ProtocolSpec) -> ProtocolSpec { spec }
}

/// What a protocol fault does to a connection whose frames the proxy follows.
package struct FaultFrames: Sendable, Equatable {
    /// One direction's part: a frame to put in at its next boundary (empty: none), and whether nothing more passes
    /// that way after it.
    package struct Insert: Sendable, Equatable {
        package var frame: [UInt8]
        package var silenceAfter: Bool
        /// Whether the frame is an answer to a request (an HTTP answer toward the client): it goes in at a boundary
        /// only while a request awaits its answer (``ProtocolPlugin/awaitsAnswer(client:server:)``), so a connection
        /// kept alive with none outstanding gets it as the answer to its next request, never unasked.
        package var answersARequest: Bool

        /// An insert.
        package init(frame: [UInt8], silenceAfter: Bool, answersARequest: Bool = false) {
            self.frame = frame
            self.silenceAfter = silenceAfter
            self.answersARequest = answersARequest
        }
    }

    /// By the producing side's ``Side/slot`` (client to server, then server to client); nil: left alone.
    package var inserts: [Insert?]
    /// How long the peers get before the proxy closes the connection.
    package var grace: ChaosDuration

    /// The frames of a fault.
    package init(toServer: Insert?, toClient: Insert?, grace: ChaosDuration) {
        inserts = [toServer, toClient]
        self.grace = grace
    }
}

/// How a fuzz target drives the audit with a plug-in's protocol.
package struct FuzzSetup: Sendable {
    /// The protocol audited.
    package var spec: ProtocolSpec
    /// What every connection starts with (a handshake), before the fuzzer's bytes.
    package var prelude: [TrafficEvent.Kind]
    /// The fuzzer's bytes left once the setup read its own.
    package var input: [UInt8]

    /// A setup.
    package init(spec: ProtocolSpec, prelude: [TrafficEvent.Kind] = [], input: [UInt8]) {
        self.spec = spec
        self.prelude = prelude
        self.input = input
    }
}
