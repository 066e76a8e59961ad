/// One QUIC packet found in a datagram, before its protection is removed (RFC 9000 §17): what its header says in the
/// clear, and where its protected part starts and ends.
package struct QUICRawPacket: Equatable, Sendable {
    package var type: QUICPacketType
    /// The version of a long header (a short header's is the connection's).
    package var version: UInt32?
    package var destination: [UInt8]
    /// A long header's Source Connection ID (empty for a short header).
    package var source: [UInt8] = []
    /// An Initial's token; a Retry's.
    package var token: [UInt8] = []
    /// The whole packet, its first byte still protected.
    package var bytes: ArraySlice<UInt8>
    /// Where in `bytes` the protected packet number starts (`bytes.startIndex`-based).
    var numberOffset: Int
}

/// Splits a UDP datagram into the QUIC packets it carries (long-header packets can be coalesced, a short-header packet
/// is always last; RFC 9000 §12.2).
package enum QUICDatagram {
    package enum Failure: Error, Equatable, CustomStringConvertible {
        case notQUIC
        case truncated(String)
        case unknownConnectionID
        /// A long header of a version chaos cannot open (its length field may mean anything).
        case unknownVersion(UInt32)

        package var description: String {
            switch self {
            case .notQUIC: "not a QUIC packet (its fixed bit is clear)"
            case .truncated(let what): "a QUIC packet cut short in its \(what)"
            case .unknownConnectionID: "a short-header packet to a connection ID this connection never issued"
            case .unknownVersion(let number): "QUIC version 0x\(String(number, radix: 16)), which chaos cannot open (it opens v1 and v2)"
            }
        }
    }

    /// Whether `datagram` starts with a client's Initial packet (a long header of a version chaos opens): the first
    /// datagram of a QUIC connection.
    package static func beginsConnection(_ datagram: ArraySlice<UInt8>) -> Bool {
        var reader = ByteReader(datagram)
        guard let first = reader.number(1), first & 0xC0 == 0xC0, let number = reader.number(4),
            let version = QUICVersion.known(UInt32(number))
        else { return false }
        return version.longPacketType(bits: UInt8(first >> 4)) == .initial
    }

    /// The Destination Connection ID of the client's Initial `datagram` begins with (nil: it begins no connection):
    /// what names the connection on every path its first datagram took (a proxy forwards it unchanged).
    package static func initialDestination(_ datagram: ArraySlice<UInt8>) -> [UInt8]? {
        guard beginsConnection(datagram), let packet = try? longHeader(datagram) else { return nil }
        return packet.destination
    }

    /// The packets of `datagram`. A short header's Destination Connection ID has no length on the wire: `idLength`
    /// tells it from the bytes after the first (the connection IDs the receiver issued), or nil for none of them.
    package static func packets(
        in datagram: ArraySlice<UInt8>,
        shortHeaderIDLength idLength: (ArraySlice<UInt8>) -> Int?
    ) throws -> [QUICRawPacket] {
        var packets: [QUICRawPacket] = []
        var rest = datagram
        while let first = rest.first {
            // Zeros after a coalesced packet pad the datagram (RFC 9000 §12.2: no packet starts so).
            if first == 0, !packets.isEmpty, rest.allSatisfy({ $0 == 0 }) { break }
            if first & 0x80 == 0 {
                packets.append(try shortHeader(rest, idLength: idLength))
                break
            }
            let packet = try longHeader(rest)
            packets.append(packet)
            rest = rest[packet.bytes.endIndex...]
        }
        return packets
    }

    private static func longHeader(_ bytes: ArraySlice<UInt8>) throws -> QUICRawPacket {
        var reader = ByteReader(bytes)
        guard let first = reader.number(1), let versionNumber = reader.number(4) else { throw Failure.truncated("long header") }
        guard let destination = reader.vector(lengthBytes: 1), let source = reader.vector(lengthBytes: 1) else {
            throw Failure.truncated("connection IDs")
        }
        let version = UInt32(versionNumber)
        guard version != 0 else {
            // Version Negotiation: the rest of the datagram lists versions.
            return QUICRawPacket(
                type: .versionNegotiation,
                version: 0,
                destination: Array(destination.rest),
                source: Array(source.rest),
                bytes: bytes,
                numberOffset: bytes.endIndex
            )
        }
        guard first & 0x40 != 0 else { throw Failure.notQUIC }
        guard let known = QUICVersion.known(version) else { throw Failure.unknownVersion(version) }
        let type = known.longPacketType(bits: UInt8(first >> 4))
        var packet = QUICRawPacket(
            type: type,
            version: version,
            destination: Array(destination.rest),
            source: Array(source.rest),
            bytes: bytes,
            numberOffset: bytes.endIndex
        )
        if type == .retry {
            packet.token = Array(reader.rest.dropLast(16))
            return packet
        }
        if type == .initial {
            guard let length = reader.varInt(), let token = reader.take(Int(clamping: length)) else { throw Failure.truncated("token") }
            packet.token = Array(token)
        }
        guard let length = reader.varInt() else { throw Failure.truncated("length") }
        let start = reader.rest.startIndex
        guard length <= UInt64(reader.rest.count), length >= 20 else { throw Failure.truncated("payload") }
        packet.numberOffset = start
        packet.bytes = bytes[bytes.startIndex..<(start + Int(length))]
        return packet
    }

    private static func shortHeader(_ bytes: ArraySlice<UInt8>, idLength: (ArraySlice<UInt8>) -> Int?) throws -> QUICRawPacket {
        guard bytes.first! & 0x40 != 0 else { throw Failure.notQUIC }
        let afterFirst = bytes.dropFirst()
        guard let length = idLength(afterFirst) else { throw Failure.unknownConnectionID }
        guard afterFirst.count >= length + 20 else { throw Failure.truncated("short header") }
        return QUICRawPacket(
            type: .oneRTT,
            version: nil,
            destination: Array(afterFirst.prefix(length)),
            bytes: bytes,
            numberOffset: afterFirst.startIndex + length
        )
    }
}

/// A packet with its protection removed: its number, and the frames' bytes.
package struct QUICOpenedPacket: Equatable, Sendable {
    package var type: QUICPacketType
    package var number: UInt64
    /// A short header's Key Phase bit (RFC 9001 §6).
    package var keyPhase: Bool
    /// The frames, decrypted.
    package var payload: [UInt8]
    /// The header with its protection removed (the AEAD's associated data).
    package var header: [UInt8]
}

extension QUICRawPacket {
    /// The header protection mask's sample and the packet's first byte and number, unprotected with `keys`; the packet
    /// number recovered from its truncated form by the largest one seen in its space (RFC 9000 §A.3).
    func open(with keys: QUICPacketKeys, largest: UInt64?) throws -> QUICOpenedPacket {
        let sampleStart = numberOffset + 4
        guard sampleStart + 16 <= bytes.endIndex else { throw QUICPacketKeys.Failure.tooShort }
        let mask = try keys.headerMask(sample: bytes[sampleStart..<(sampleStart + 16)])
        var header = Array(bytes[bytes.startIndex..<numberOffset])
        let isLong = header[0] & 0x80 != 0
        header[0] ^= mask[0] & (isLong ? 0x0F : 0x1F)
        let numberLength = Int(header[0] & 0x03) + 1
        var truncated: UInt64 = 0
        for index in 0..<numberLength {
            let byte = bytes[numberOffset + index] ^ mask[1 + index]
            header.append(byte)
            truncated = truncated << 8 | UInt64(byte)
        }
        let number = Self.decodeNumber(truncated, bits: numberLength * 8, largest: largest)
        let payload = try keys.open(payload: bytes[(numberOffset + numberLength)...], header: header[...], number: number)
        return QUICOpenedPacket(type: type, number: number, keyPhase: !isLong && header[0] & 0x04 != 0, payload: payload, header: header)
    }

    /// RFC 9000 §A.3: the packet number closest to the one after `largest` whose low `bits` are `truncated`.
    static func decodeNumber(_ truncated: UInt64, bits: Int, largest: UInt64?) -> UInt64 {
        guard let largest else { return truncated }
        let expected = largest &+ 1
        let window: UInt64 = 1 << UInt64(bits)
        let halfWindow = window / 2
        let mask = window - 1
        let candidate = (expected & ~mask) | truncated
        if candidate &+ halfWindow <= expected, candidate < (1 << 62) - window { return candidate + window }
        if candidate > expected &+ halfWindow, candidate >= window { return candidate - window }
        return candidate
    }
}

extension ByteReader {
    /// A QUIC variable-length integer (RFC 9000 §16): its first byte's two high bits say 1, 2, 4 or 8 bytes.
    mutating func varInt() -> UInt64? {
        guard let first = rest.first else { return nil }
        let length = 1 << Int(first >> 6)
        guard let value = number(length) else { return nil }
        let mask: UInt64 = length == 8 ? 0x3FFF_FFFF_FFFF_FFFF : (UInt64(1) << UInt64(length * 8 - 2)) - 1
        return UInt64(truncatingIfNeeded: value) & mask
    }
}
