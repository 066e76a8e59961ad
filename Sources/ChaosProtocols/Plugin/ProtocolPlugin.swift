public import ChaosCore

/// One protocol chaos understands, as a plug-in: one type per protocol, listed once in ``ProtocolRegistry``.
///
/// A plug-in gives its framing names; for the audit, a per-connection session that makes the decoder of each
/// connection leg; and, for a protocol whose frames the proxy follows (``frames``), the tracker of its frame
/// boundaries and the frames its protocol faults (`ws-close`, `goaway`) put in between two frames. Nothing outside
/// the registry and the plug-ins switches over protocols: the audit and the proxy ask the plug-in.
public protocol ProtocolPlugin: Sendable {
    /// The names `protocol.framing` and `--framing` accept (the first is the canonical one).
    static var names: [String] { get }
    /// The framing this protocol reads with its own options, numbers by key as a scenario names them
    /// (`length_bytes`, `length_offset`); throws `ChaosError.badInput` for one it does not take or out of range.
    static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing
    /// The option keys ``framing(options:)`` takes.
    static var optionKeys: [String] { get }
    /// The message format when none is given (`protobuf` for gRPC).
    static var defaultFormat: ProtocolSpec.Format { get }
    /// The stream key when none is given (`rpc` for gRPC: each call is a stream).
    static var defaultStream: String { get }
    /// Whether its messages belong to RPCs that `descriptors` and `methods` name.
    static var hasRPCs: Bool { get }
    /// The named counters its events add to (`upgrades`, `pings`, `calls`).
    static var counters: [ProtocolCounter] { get }
    /// Its families of counts by code (`closeCodes`: `1000`, `1012`; `goaways`: `NO_ERROR`), total and per fault.
    static var counterFamilies: [ProtocolCounter] { get }
    /// Whether `framing` (a scenario's `protocol.framing`) is this protocol.
    static func reads(_ framing: ProtocolSpec.Framing) -> Bool
    /// The audit's part for `spec`: what makes each connection's session and its legs' decoders. `auditedMethods`:
    /// the RPCs audited (nil: every one). Throws `ChaosError.badInput` for options it cannot read.
    static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer
    /// This protocol's fuzz target (`chaos-fuzz`, corpus `Fuzz/corpus/NAME/`): from a fuzzer's input, the spec, the
    /// events every connection starts with (a handshake) and the bytes left. nil: it has none.
    static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup?
    /// The frames the proxy follows for this protocol's faults; nil: the proxy never follows its frames.
    static var frames: FrameProtocol? { get }
    /// A tracker of the frame boundaries in the bytes `producer` writes (only asked when ``frames`` is set).
    static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking
    /// The frames `effect` puts in, when it is one of this protocol's faults (nil otherwise). `connection` makes a
    /// client's masking key; `client` is the tracker of the client's bytes (HTTP/2: the streams it opened).
    static func faultFrames(_ effect: FaultEffect, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames?
}

extension ProtocolPlugin {
    /// A framing with no options of its own: `options` must be empty.
    static func noOptions(_ options: [String: Int], _ framing: ProtocolSpec.Framing) throws -> ProtocolSpec.Framing {
        if let key = options.keys.sorted().first { throw ChaosError.badInput("protocol.\(key) is not an option of framing \(name)") }
        return framing
    }

    /// The canonical framing name.
    public static var name: String { names[0] }
    public static var optionKeys: [String] { [] }
    public static var counters: [ProtocolCounter] { [] }
    public static var counterFamilies: [ProtocolCounter] { [] }
    public static var defaultFormat: ProtocolSpec.Format { .json }
    public static var defaultStream: String { "stream" }
    public static var hasRPCs: Bool { false }
    public static var frames: FrameProtocol? { nil }
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
