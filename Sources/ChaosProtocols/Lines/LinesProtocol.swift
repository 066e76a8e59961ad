public import ChaosCore

/// `framing: lines`: newline-delimited messages (the default).
public enum LinesProtocol: ProtocolPlugin {
    public static let names = ["lines"]

    public static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing { try noOptions(options, .lines) }

    public static func reads(_ framing: ProtocolSpec.Framing) -> Bool { framing == .lines }

    /// NDJSON with acknowledgements.
    public static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? { FuzzSetup(spec: ProtocolSpec(ack: "ack"), input: input) }

    public static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        SplitterSession(mode: .lines)
    }
}
