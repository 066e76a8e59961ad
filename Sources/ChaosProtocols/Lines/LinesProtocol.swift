package import ChaosCore

/// `framing: lines`: newline-delimited messages (the default).
package enum LinesProtocol: ProtocolPlugin {
    package static let names = ["lines"]

    package static let carriesBinary = false

    /// NDJSON with acknowledgements.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? { FuzzSetup(spec: ProtocolSpec(ack: "ack"), input: input) }

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        SplitterSession(mode: .lines)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: lines`.
    package static let lines = Self(name: LinesProtocol.name)
}
