/// The QUIC versions whose packets chaos can open: version 1 (RFC 9000, RFC 9001) and version 2 (RFC 9369), which
/// differ only in the Initial salt, the labels of the key derivation and the numbering of the long header's types.
package struct QUICVersion: Hashable, Sendable, CustomStringConvertible {
    /// The version field of a long header.
    package let number: UInt32
    /// The salt the Initial secrets are extracted with.
    let initialSalt: [UInt8]
    /// What the key derivation's labels start with: `"quic "` (v1) or `"quicv2 "` (v2).
    let labelPrefix: String

    package static let v1 = QUICVersion(
        number: 0x0000_0001,
        initialSalt: [
            0x38, 0x76, 0x2C, 0xF7, 0xF5, 0x59, 0x34, 0xB3, 0x4D, 0x17, 0x9A, 0xE6, 0xA4, 0xC8, 0x0C, 0xAD, 0xCC, 0xBB, 0x7F, 0x0A,
        ],
        labelPrefix: "quic "
    )

    package static let v2 = QUICVersion(
        number: 0x6B33_43CF,
        initialSalt: [
            0x0D, 0xED, 0xE3, 0xDE, 0xF7, 0x00, 0xA6, 0xDB, 0x81, 0x93, 0x81, 0xBE, 0x6E, 0x26, 0x9D, 0xCB, 0xF9, 0xBD, 0x2E, 0xD9,
        ],
        labelPrefix: "quicv2 "
    )

    /// The version a long header's version field names, when chaos can open it.
    package static func known(_ number: UInt32) -> QUICVersion? {
        switch number {
        case v1.number: v1
        case v2.number: v2
        default: nil
        }
    }

    /// The type a long header's two type bits name under this version (RFC 9000 §17.2; RFC 9369 §3.2 renumbers them).
    func longPacketType(bits: UInt8) -> QUICPacketType {
        let types: [QUICPacketType] =
            self == .v2 ? [.retry, .initial, .zeroRTT, .handshake] : [.initial, .zeroRTT, .handshake, .retry]
        return types[Int(bits & 0x03)]
    }

    package var description: String {
        switch self {
        case .v1: "QUIC v1"
        case .v2: "QUIC v2"
        default: "QUIC version 0x" + String(number, radix: 16)
        }
    }

    package static func == (lhs: QUICVersion, rhs: QUICVersion) -> Bool { lhs.number == rhs.number }
    package func hash(into hasher: inout Hasher) { hasher.combine(number) }
}

/// The kinds of QUIC packet (RFC 9000 §17).
package enum QUICPacketType: String, Hashable, Sendable {
    case initial = "Initial"
    case zeroRTT = "0-RTT"
    case handshake = "Handshake"
    case retry = "Retry"
    case versionNegotiation = "Version Negotiation"
    /// The short header: 1-RTT.
    case oneRTT = "1-RTT"

    /// The packet number space its packets count in and its frames are acknowledged in (RFC 9000 §12.3).
    package var space: QUICPacketSpace? {
        switch self {
        case .initial: .initial
        case .handshake: .handshake
        case .zeroRTT, .oneRTT: .application
        case .retry, .versionNegotiation: nil
        }
    }
}

/// QUIC's three packet number spaces.
package enum QUICPacketSpace: Int, CaseIterable, Hashable, Sendable {
    case initial, handshake, application
}
