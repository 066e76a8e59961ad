public import ChaosCore

/// One protocol chaos understands, as a plug-in: one type per protocol, listed once in ``ProtocolRegistry``.
///
/// A plug-in gives its framing names; for the audit, a per-connection session that makes the decoder of each
/// connection leg; and, for a protocol whose frames the proxy follows (``frames``), the tracker of its frame
/// boundaries and the frames its protocol faults (`ws-close`, `goaway`) put in between two frames. Nothing outside
/// the registry and the plug-ins switches over protocols: the audit and the proxy ask the plug-in.
public protocol ProtocolPlugin: FramingTraits {
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
    /// The frames `effect` puts in, when it is one of this protocol's faults (nil otherwise). `connection` makes a
    /// client's masking key; `client` is the tracker of the client's bytes (HTTP/2: the streams it opened).
    static func faultFrames(_ effect: FaultEffect, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames?
}

extension ProtocolPlugin {
    public static var counters: [ProtocolCounter] { [] }
    public static var counterFamilies: [ProtocolCounter] { [] }
    public static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? { nil }
    public static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking { NoFrameBoundaries() }
    public static func faultFrames(_ effect: FaultEffect, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames? { nil }
}

/// What a protocol fault does to a connection whose frames the proxy follows.
public struct FaultFrames: Sendable, Equatable {
    /// One direction's part: a frame to put in at its next boundary (empty: none), and whether nothing more passes
    /// that way after it.
    public struct Insert: Sendable, Equatable {
        public var frame: [UInt8]
        public var silenceAfter: Bool

        /// An insert.
        public init(frame: [UInt8], silenceAfter: Bool) {
            self.frame = frame
            self.silenceAfter = silenceAfter
        }
    }

    /// By the producing side's ``Side/slot`` (client to server, then server to client); nil: left alone.
    public var inserts: [Insert?]
    /// How long the peers get before the proxy closes the connection.
    public var grace: ChaosDuration

    /// The frames of a fault.
    public init(toServer: Insert?, toClient: Insert?, grace: ChaosDuration) {
        inserts = [toServer, toClient]
        self.grace = grace
    }
}

/// How a fuzz target drives the audit with a plug-in's protocol.
public struct FuzzSetup: Sendable {
    /// The protocol audited.
    public var spec: ProtocolSpec
    /// What every connection starts with (a handshake), before the fuzzer's bytes.
    public var prelude: [TrafficEvent.Kind]
    /// The fuzzer's bytes left once the setup read its own.
    public var input: [UInt8]

    /// A setup.
    public init(spec: ProtocolSpec, prelude: [TrafficEvent.Kind] = [], input: [UInt8]) {
        self.spec = spec
        self.prelude = prelude
        self.input = input
    }
}
