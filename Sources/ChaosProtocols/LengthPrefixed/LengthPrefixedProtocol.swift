public import ChaosCore

/// `framing: length-prefixed`: a big-endian length prefix of 1, 2 or 4 bytes before each message.
public enum LengthPrefixedProtocol: ProtocolPlugin {
    public static let names = ["length-prefixed"]
    public static let optionKeys = ["length_bytes", "length_offset"]

    /// `length_bytes` 1, 2 or 4 (default 4) and `length_offset` -8...8 (default 0), added to the length read.
    public static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing {
        if let key = options.keys.sorted().first(where: { !optionKeys.contains($0) }) {
            throw ChaosError.badInput("protocol.\(key) is not an option of framing \(name)")
        }
        let bytes = options["length_bytes"] ?? 4, offset = options["length_offset"] ?? 0
        guard [1, 2, 4].contains(bytes) else { throw ChaosError.badInput("protocol.length_bytes must be 1, 2 or 4, found \(bytes)") }
        guard (-8...8).contains(offset) else { throw ChaosError.badInput("protocol.length_offset must be within -8...8, found \(offset)") }
        return .lengthPrefixed(bytes: bytes, offset: offset)
    }

    public static func reads(_ framing: ProtocolSpec.Framing) -> Bool {
        if case .lengthPrefixed = framing { true } else { false }
    }

    /// The first byte picks the prefix's width.
    public static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        let width = [1, 2, 4][Int(input.first ?? 0) % 3]
        return FuzzSetup(spec: ProtocolSpec(framing: .lengthPrefixed(bytes: width, offset: 0)), input: Array(input.dropFirst()))
    }

    public static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        guard case .lengthPrefixed(let bytes, let offset) = spec.framing else {
            throw ChaosError.badInput("protocol.framing is not length-prefixed: \(spec.framing)")
        }
        guard [1, 2, 4].contains(bytes) else {
            throw ChaosError.badInput("protocol.framing length-prefixed needs a 1, 2 or 4 byte length, found \(bytes)")
        }
        return SplitterSession(mode: .lengthPrefixed(bytes: bytes, offset: offset))
    }
}
