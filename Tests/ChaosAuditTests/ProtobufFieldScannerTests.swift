import ChaosCore
import ChaosProtocols
import Testing

@testable import ChaosAudit

/// A hand-rolled protobuf encoder for the tests (the wire format is small enough to write out by hand).
enum Wire {
    static func varint(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(rest & 0x7f) | 0x80)
            rest >>= 7
        }
        return bytes + [UInt8(rest)]
    }
    static func key(_ number: UInt64, _ type: UInt64) -> [UInt8] { varint(number << 3 | type) }
    static func int(_ number: UInt64, _ value: Int64) -> [UInt8] { key(number, 0) + varint(UInt64(bitPattern: value)) }
    static func sint(_ number: UInt64, _ value: Int64) -> [UInt8] {
        key(number, 0) + varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }
    static func fixed64(_ number: UInt64, _ value: UInt64) -> [UInt8] {
        key(number, 1) + (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
    static func fixed32(_ number: UInt64, _ value: UInt32) -> [UInt8] {
        key(number, 5) + (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
    static func bytes(_ number: UInt64, _ value: [UInt8]) -> [UInt8] { key(number, 2) + varint(UInt64(value.count)) + value }
    static func string(_ number: UInt64, _ value: String) -> [UInt8] { bytes(number, Array(value.utf8)) }
}

@Suite("Protobuf fields by number path, without a schema")
struct ProtobufFieldScannerTests {
    private func scan(_ message: [UInt8], _ fields: [String]) -> (ok: Bool, values: [ProtobufWireValue?]) {
        let scanner = ProtobufFieldScanner(fields: fields)
        var values = [ProtobufWireValue?](repeating: nil, count: fields.count)
        let ok = message.withUnsafeBufferPointer { scanner.scan($0, into: &values) }
        return (ok, values)
    }

    private func text(_ message: [UInt8], _ value: ProtobufWireValue?) -> String? {
        guard case .bytes(let start, let end) = value else { return nil }
        return String(decoding: message[start..<end], as: UTF8.self)
    }

    @Test("the varint of RFC-style example 150 in field 1 reads as 150")
    func classicVarint() {
        let result = scan([0x08, 0x96, 0x01], ["1"])
        #expect(result.ok)
        #expect(result.values[0] == .varint(150))
        #expect(result.values[0]?.integer() == 150)
    }

    @Test("every wire type reads: varint, zigzag, fixed64, fixed32 (signed), length-delimited")
    func everyWireType() {
        let message =
            Wire.int(1, 42) + Wire.sint(2, -3) + Wire.fixed64(3, UInt64(bitPattern: -7))
            + Wire.fixed32(4, UInt32(bitPattern: -9)) + Wire.string(5, "c1") + Wire.int(6, -1)
        let result = scan(message, ["1", "2", "3", "4", "5", "6"])
        #expect(result.ok)
        #expect(result.values[0]?.integer() == 42)
        #expect(result.values[1]?.integer(zigzag: true) == -3)
        #expect(result.values[2]?.integer() == -7)
        #expect(result.values[3]?.integer() == -9)
        #expect(text(message, result.values[4]) == "c1")
        #expect(result.values[4]?.integer() == nil)
        #expect(result.values[5]?.integer() == -1, "a negative int64 is a 10-byte varint")
    }

    @Test("a nested path (4.1, 4.2.3) is followed into nested messages only where wanted")
    func nestedPaths() {
        let inner = Wire.int(3, 99)
        let middle = Wire.int(1, 7) + Wire.bytes(2, inner)
        let message = Wire.string(1, "x") + Wire.bytes(4, middle) + Wire.int(9, 1)
        let result = scan(message, ["4.1", "4.2.3", "1", "4.5", ""])
        #expect(result.ok)
        #expect(result.values[0]?.integer() == 7)
        #expect(result.values[1]?.integer() == 99)
        #expect(text(message, result.values[2]) == "x")
        #expect(result.values[3] == nil)
        #expect(result.values[4] == nil, "an empty name is never looked for")
    }

    @Test("the last occurrence of a field wins; unknown fields and groups are skipped")
    func lastWinsAndSkips() {
        let group = Wire.key(7, 3) + Wire.int(1, 5) + Wire.string(2, "in group") + Wire.key(7, 4)
        let message = Wire.int(1, 1) + group + Wire.fixed32(8, 3) + Wire.int(1, 2)
        let result = scan(message, ["1"])
        #expect(result.ok)
        #expect(result.values[0]?.integer() == 2)
    }

    @Test(
        "malformed bytes are refused without a trap",
        arguments: [
            [0x08, 0x96],  // varint cut short
            [0x12, 0x05, 0x61],  // length past the end
            [0x0f],  // wire type 7
            [0x0c],  // end-group with no start
            [0x0b, 0x08, 0x01],  // group never ended
            [0x08] + [UInt8](repeating: 0xff, count: 11),  // a varint longer than 10 bytes
            [0x00, 0x01],  // field number 0
            [0x09, 0x01, 0x02],  // fixed64 cut short
        ] as [[UInt8]]
    )
    func malformed(message: [UInt8]) {
        #expect(!scan(message, ["1", "2.1"]).ok)
    }

    @Test("field paths: numbers 1 ... 2^29-1 joined by dots; anything else is no path")
    func paths() {
        #expect(ProtobufFieldScanner.path("2") == [2])
        #expect(ProtobufFieldScanner.path("4.1") == [4, 1])
        for bad in ["", "0", "a", "1.", ".1", "4..1", "536870912", "-1", "seq"] {
            #expect(ProtobufFieldScanner.path(bad) == nil, "\(bad)")
        }
    }

    @Test("10,000 seeded random buffers never trap and never read outside the frame")
    func randomBytesNeverTrap() {
        var state: UInt64 = 0x9e37_79b9_7f4a_7c15
        func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
        var accepted = 0
        for _ in 0..<10_000 {
            let count = Int(next() % 64)
            let message = (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
            if scan(message, ["1", "2.1", "3.2.1"]).ok { accepted += 1 }
        }
        #expect(accepted > 0)
    }

    @Test("a resolved field reads from a real message: the scanner finds sequence_id and the zigzag meta.seq")
    func resolvesAndScans() throws {
        let schema = try ProtobufSchema.load(path: GRPCAuditTests.protoset)
        let seq = try schema.field("sequence_id", in: "follow.v1.RaceRequest")
        let nested = try schema.field("meta.seq", in: "follow.v1.RaceRequest")
        let message = Wire.string(1, "s1") + Wire.int(2, 41) + Wire.bytes(4, Wire.string(1, "s1") + Wire.sint(2, -5))
        let scanner = ProtobufFieldScanner(fields: [seq.path, nested.path].map { $0.map(String.init).joined(separator: ".") })
        var values = [ProtobufWireValue?](repeating: nil, count: 2)
        #expect(message.withUnsafeBufferPointer { scanner.scan($0, into: &values) })
        #expect(values[0]?.integer(zigzag: seq.zigzag) == 41)
        #expect(values[1]?.integer(zigzag: nested.zigzag) == -5)
    }
}
