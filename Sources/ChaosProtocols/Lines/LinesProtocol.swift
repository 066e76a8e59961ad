public import ChaosCore

/// `framing: lines`: newline-delimited messages (the default).
public enum LinesProtocol: ProtocolPlugin {
    public static let names = ["lines"]

    public static let carriesBinary = false

    /// NDJSON with acknowledgements.
    public static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? { FuzzSetup(spec: ProtocolSpec(ack: "ack"), input: input) }

    public static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        SplitterSession(mode: .lines)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: lines`.
    public static let lines = Self(name: LinesProtocol.name)
}
