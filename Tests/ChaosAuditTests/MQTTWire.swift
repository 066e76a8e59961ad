/// MQTT control packets built by hand (OASIS MQTT 3.1.1 and 5.0), for the decoder's tests: each packet is its
/// fixed header (type and flags, the remaining length as a variable byte integer) and its body.
enum MQTTWire {
    /// A packet of `type` (the high nibble) with `flags` and `body`.
    static func packet(_ type: UInt8, flags: UInt8 = 0, _ body: [UInt8]) -> [UInt8] {
        [type << 4 | flags] + variableInteger(body.count) + body
    }

    static func variableInteger(_ value: Int) -> [UInt8] {
        var value = value
        var out: [UInt8] = []
        repeat {
            var byte = UInt8(value & 0x7F)
            value >>= 7
            if value > 0 { byte |= 0x80 }
            out.append(byte)
        } while value > 0
        return out
    }

    static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }

    static func uint16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    /// MQTT 5 properties: their length, then the property bytes.
    static func properties(_ bytes: [UInt8]) -> [UInt8] { variableInteger(bytes.count) + bytes }

    /// CONNECT of `level` 4 (3.1.1) or 5 (5.0), keepalive 60 s.
    static func connect(_ clientID: String, level: UInt8 = 4, clean: Bool = true, properties props: [UInt8] = []) -> [UInt8] {
        let head = string("MQTT") + [level, clean ? 0b10 : 0] + uint16(60)
        return packet(1, head + (level >= 5 ? properties(props) : []) + string(clientID))
    }

    static func connack(sessionPresent: Bool = false, code: UInt8 = 0, level: UInt8 = 4, properties props: [UInt8] = []) -> [UInt8] {
        packet(2, [sessionPresent ? 1 : 0, code] + (level >= 5 ? properties(props) : []))
    }

    static func publish(
        _ topic: String,
        _ payload: String,
        qos: UInt8 = 0,
        id: UInt16 = 1,
        dup: Bool = false,
        retain: Bool = false,
        level: UInt8 = 4,
        properties props: [UInt8] = []
    ) -> [UInt8] {
        let flags = (dup ? 0b1000 : 0) | qos << 1 | (retain ? 1 : 0)
        let body = string(topic) + (qos > 0 ? uint16(id) : []) + (level >= 5 ? properties(props) : []) + Array(payload.utf8)
        return packet(3, flags: flags, body)
    }

    static func puback(_ id: UInt16) -> [UInt8] { packet(4, uint16(id)) }
    static func pubrec(_ id: UInt16) -> [UInt8] { packet(5, uint16(id)) }
    static func pubrel(_ id: UInt16) -> [UInt8] { packet(6, flags: 0b0010, uint16(id)) }
    static func pubcomp(_ id: UInt16) -> [UInt8] { packet(7, uint16(id)) }
    static func suback(id: UInt16 = 1, granted: UInt8 = 1) -> [UInt8] { packet(9, uint16(id) + [granted]) }
    static func subscribe(_ filter: String, id: UInt16 = 1) -> [UInt8] { packet(8, flags: 0b0010, uint16(id) + string(filter) + [1]) }
    static let pingreq: [UInt8] = [0xC0, 0]
    static let pingresp: [UInt8] = [0xD0, 0]

    static func disconnect(reason: UInt8? = nil) -> [UInt8] { packet(14, reason.map { [$0, 0] } ?? []) }
}
