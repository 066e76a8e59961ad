/// The control packet types of MQTT 3.1.1 and 5.0: the high nibble of a packet's first byte.
enum MQTTPacketType: UInt8, Sendable {
    case connect = 1
    case connack, publish, puback, pubrec, pubrel, pubcomp, subscribe, suback, unsubscribe, unsuback, pingreq, pingresp
    case disconnect, auth

    /// The low nibble the type requires (PUBREL, SUBSCRIBE and UNSUBSCRIBE: `0010`; PUBLISH: its own flags, nil).
    var requiredFlags: UInt8? {
        switch self {
        case .publish: nil
        case .pubrel, .subscribe, .unsubscribe: 0b0010
        default: 0
        }
    }
}

/// A packet that ends before one of its fields does, or holds a field MQTT does not allow.
struct MQTTMalformed: Error, Equatable {
    /// What is wrong (`a string runs past the packet's end`).
    var reason: String

    init(_ reason: String) { self.reason = reason }
}

/// Reads the fields of one packet's variable header and payload (OASIS MQTT 3.1.1 section 1.5, 5.0 section 1.5):
/// bytes, big-endian integers, length-prefixed UTF-8 strings, variable byte integers and MQTT 5 properties. Every
/// read checks the packet's end and throws ``MQTTMalformed`` past it. It reads the packet in place: the reader and
/// what it hands back are valid only while `bytes` is.
struct MQTTFieldReader {
    let bytes: UnsafeBufferPointer<UInt8>
    private(set) var position = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The bytes not read yet.
    var remaining: Int { bytes.count - position }

    mutating func byte() throws -> UInt8 {
        guard position < bytes.count else { throw MQTTMalformed("a field runs past the packet's end") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func uint16() throws -> UInt16 {
        let high = try byte()
        let low = try byte()
        return UInt16(high) << 8 | UInt16(low)
    }

    mutating func uint32() throws -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 { value = value << 8 | UInt32(try byte()) }
        return value
    }

    /// A variable byte integer: 7 bits a byte, low first, at most four bytes.
    mutating func variableInteger() throws -> Int {
        var value = 0
        for index in 0..<4 {
            let next = try byte()
            value |= Int(next & 0x7F) << (7 * index)
            if next & 0x80 == 0 { return value }
        }
        throw MQTTMalformed("a variable byte integer longer than four bytes")
    }

    /// Two bytes of length, then that many bytes.
    mutating func binary() throws -> UnsafeBufferPointer<UInt8> {
        let length = Int(try uint16())
        guard length <= remaining else { throw MQTTMalformed("a string of \(length) bytes runs past the packet's end") }
        defer { position += length }
        return UnsafeBufferPointer(rebasing: bytes[position..<position + length])
    }

    /// A UTF-8 string (its bytes decoded leniently: a broken code point shows as U+FFFD).
    mutating func string() throws -> String {
        String(decoding: try binary(), as: UTF8.self)
    }

    mutating func skip(_ count: Int) throws {
        guard count <= remaining else { throw MQTTMalformed("a field runs past the packet's end") }
        position += count
    }

    /// The rest of the packet.
    mutating func rest() -> UnsafeBufferPointer<UInt8> {
        defer { position = bytes.count }
        return UnsafeBufferPointer(rebasing: bytes[position...])
    }

    /// An MQTT 5 property list (its length, then identifier and value pairs), keeping the properties chaos reads.
    mutating func properties() throws -> MQTTProperties {
        let length = try variableInteger()
        guard length <= remaining else { throw MQTTMalformed("properties of \(length) bytes run past the packet's end") }
        let end = position + length
        var found = MQTTProperties()
        while position < end {
            let identifier = try variableInteger()
            switch identifier {
            case 0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A: try skip(1)
            case 0x13, 0x21, 0x22: try skip(2)
            case 0x23: found.topicAlias = try uint16()
            case 0x02, 0x18, 0x27: try skip(4)
            case 0x11: found.sessionExpiry = try uint32()
            case 0x0B: _ = try variableInteger()
            case 0x12: found.assignedClientID = try string()
            case 0x1F: found.reason = try string()
            case 0x03, 0x08, 0x15, 0x1A, 0x1C, 0x09, 0x16: _ = try binary()
            case 0x26:
                _ = try binary()
                _ = try binary()
            default: throw MQTTMalformed("an unknown property 0x\(String(identifier, radix: 16, uppercase: true))")
            }
        }
        guard position == end else { throw MQTTMalformed("a property runs past the end of its list") }
        return found
    }
}

/// The MQTT 5 properties chaos reads; the others are skipped.
struct MQTTProperties: Equatable {
    /// PUBLISH: a number that stands for the topic on this connection, one direction (0x23).
    var topicAlias: UInt16?
    /// CONNECT, CONNACK, DISCONNECT: how long the broker keeps the session after the connection ends (0x11).
    var sessionExpiry: UInt32?
    /// CONNACK: the client id the broker gave a client that sent none (0x12).
    var assignedClientID: String?
    /// The reason string of an acknowledgement or a DISCONNECT (0x1F).
    var reason: String?
}
