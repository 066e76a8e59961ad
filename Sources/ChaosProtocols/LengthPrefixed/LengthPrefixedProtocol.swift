package import ChaosCore

/// `framing: length-prefixed`: a big-endian length prefix of 1, 2 or 4 bytes before each message.
package enum LengthPrefixedProtocol: ProtocolPlugin {
    package static let names = ["length-prefixed"]
    package static let optionKeys = ["length_bytes", "length_offset"]

    /// `length_bytes` 1, 2 or 4 (default 4) and `length_offset` -8...8 (default 0), added to the length read;
    /// kept as the framing's `bytes` and `offset`.
    package static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing {
        if let key = options.keys.sorted().first(where: { !optionKeys.contains($0) }) {
            throw FramingOptionProblem(key, "is not an option of framing \(name)")
        }
        let framing = ProtocolSpec.Framing.lengthPrefixed(bytes: options["length_bytes"] ?? 4, offset: options["length_offset"] ?? 0)
        try check(framing)
        return framing
    }

    package static func check(_ framing: ProtocolSpec.Framing) throws {
        if let key = framing.options.keys.sorted().first(where: { !["bytes", "offset"].contains($0) }) {
            throw FramingOptionProblem(key, "is not an option of framing \(name)")
        }
        let (bytes, offset) = widthAndOffset(framing)
        guard [1, 2, 4].contains(bytes) else { throw FramingOptionProblem("length_bytes", "must be 1, 2 or 4, found \(bytes)") }
        guard (-8...8).contains(offset) else { throw FramingOptionProblem("length_offset", "must be within -8...8, found \(offset)") }
    }

    /// The first byte picks the prefix's width.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        let width = [1, 2, 4][Int(input.first ?? 0) % 3]
        return FuzzSetup(spec: ProtocolSpec(framing: .lengthPrefixed(bytes: width, offset: 0)), input: Array(input.dropFirst()))
    }

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        do { try check(spec.framing) } catch let problem as FramingOptionProblem { throw ChaosError.badInput(problem.message) }
        let (bytes, offset) = widthAndOffset(spec.framing)
        return SplitterSession(mode: .lengthPrefixed(bytes: bytes, offset: offset))
    }

    private static func widthAndOffset(_ framing: ProtocolSpec.Framing) -> (bytes: Int, offset: Int) {
        (framing.options["bytes"] ?? 4, framing.options["offset"] ?? 0)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: length-prefixed` with a `bytes`-wide prefix; `offset` is added to the length read (a prefix that
    /// counts itself uses a negative offset).
    package static func lengthPrefixed(bytes: Int, offset: Int) -> Self {
        Self(name: LengthPrefixedProtocol.name, options: ["bytes": bytes, "offset": offset])
    }
}
