import ChaosCore

/// One field's value as the protobuf wire format carries it (no schema: the wire type is all there is).
enum ProtobufWireValue: Equatable {
    /// Wire type 0: int32, int64, uint32, uint64, sint32/sint64 (zigzag), bool, enum.
    case varint(UInt64)
    /// Wire type 1: fixed64, sfixed64, double.
    case fixed64(UInt64)
    /// Wire type 5: fixed32, sfixed32, float.
    case fixed32(UInt32)
    /// Wire type 2: a string, bytes, a nested message or a packed repeated field: where its bytes lie in the frame.
    case bytes(start: Int, end: Int)

    /// The value as a signed integer, the way protobuf's integer types read it: a varint as int64 (or, with
    /// `zigzag`, as sint64), fixed64 as sfixed64, fixed32 as sfixed32. Nil for length-delimited values.
    func integer(zigzag: Bool = false) -> Int64? {
        switch self {
        case .varint(let raw):
            zigzag ? Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))) : Int64(bitPattern: raw)
        case .fixed64(let raw): Int64(bitPattern: raw)
        case .fixed32(let raw): Int64(Int32(bitPattern: raw))
        case .bytes: nil
        }
    }
}

/// Finds a few fields of a protobuf message by field-number path (`2`, or `4.1` for field 1 of the message in
/// field 4) in one pass over its bytes, without generated code or a schema: the protobuf counterpart of
/// ``JSONFieldScanner``. Nested messages are entered only along a wanted path. Where a field occurs more than
/// once, the last occurrence wins (protobuf's rule for a singular field).
///
/// Bytes that are not a protobuf message (a truncated varint, a length past the end, wire type 6 or 7, an
/// unbalanced group) make ``scan(_:into:)`` return false; it never reads outside the frame and never traps. A class:
/// the extractor reads it once per message, and a reference costs one retain where a struct of arrays cost one per array.
final class ProtobufFieldScanner {
    /// Each wanted field as a path of field numbers; an empty path is a placeholder that is never looked for.
    let paths: [[UInt64]]

    /// The deepest nesting followed (a path is at most this long).
    static let maxDepth = 32

    /// The indices of the fields looked for (their paths are not empty).
    let wanted: [Int]
    /// When every field looked for is a top-level field (the common `seq: "1"`): per field its number (0 for a
    /// placeholder), read by ``scanTopLevel(_:_:_:)`` with no per-message arrays.
    let topLevel: [UInt64]?

    /// `names` are field-number paths such as `2` or `4.1`; an empty name keeps its slot but is not looked for.
    init(fields names: [String]) {
        let paths = names.map { Self.path($0) ?? [] }
        self.paths = paths
        wanted = paths.indices.filter { !paths[$0].isEmpty }
        topLevel = paths.allSatisfy { $0.count <= 1 } ? paths.map { $0.first ?? 0 } : nil
        values = .allocate(capacity: max(paths.count, 1))
        values.initialize(repeating: nil)
    }

    deinit { values.deallocate() }

    /// What the last ``scan(_:)`` found, one value per field in order (nil when absent): the scanner's own buffer,
    /// valid until the next scan.
    let values: UnsafeMutableBufferPointer<ProtobufWireValue?>

    /// Fills ``values``. Returns false when `frame` is not a well-formed protobuf message along the paths scanned.
    func scan(_ frame: UnsafeBufferPointer<UInt8>) -> Bool {
        for index in 0..<paths.count { values[index] = nil }
        if let topLevel {
            return topLevel.withUnsafeBufferPointer { Self.scanTopLevel(frame, $0, values) }
        }
        var found = [ProtobufWireValue?](repeating: nil, count: paths.count)
        defer { for index in 0..<paths.count { values[index] = found[index] } }
        return scanMessage(frame, 0, frame.count, depth: 0, wanted: wanted, &found)
    }

    /// `4.1` as [4, 1]; nil when it is not a dotted list of field numbers (1 ... 2^29 - 1).
    static func path(_ name: String) -> [UInt64]? { ProtocolSpec.fieldNumberPath(name) }

    /// Fills `values` (one per wanted field, in order; nil when absent). Returns false when `frame` is not a
    /// well-formed protobuf message along the paths scanned.
    func scan(_ frame: UnsafeBufferPointer<UInt8>, into values: inout [ProtobufWireValue?]) -> Bool {
        let found = scan(frame)
        values = Array(self.values.prefix(values.count))
        return found
    }

    /// ``scanMessage(_:_:_:depth:wanted:_:)`` of a whole frame when every wanted field is a top-level one (`numbers`:
    /// per field its number, 0 for none): the same answers, with no array made or copied per field.
    private static func scanTopLevel(
        _ b: UnsafeBufferPointer<UInt8>,
        _ numbers: UnsafeBufferPointer<UInt64>,
        _ values: UnsafeMutableBufferPointer<ProtobufWireValue?>
    ) -> Bool {
        var cursor = 0
        let end = b.count
        while cursor < end {
            guard let key = varint(b, &cursor, end) else { return false }
            let number = key >> 3
            guard number > 0 else { return false }
            let value: ProtobufWireValue
            switch key & 7 {
            case 0:
                guard let raw = varint(b, &cursor, end) else { return false }
                value = .varint(raw)
            case 1:
                guard end - cursor >= 8 else { return false }
                value = .fixed64(littleEndian(b, cursor, 8))
                cursor += 8
            case 5:
                guard end - cursor >= 4 else { return false }
                value = .fixed32(UInt32(truncatingIfNeeded: littleEndian(b, cursor, 4)))
                cursor += 4
            case 2:
                guard let length = varint(b, &cursor, end), length <= UInt64(end - cursor) else { return false }
                value = .bytes(start: cursor, end: cursor + Int(length))
                cursor += Int(length)
            case 3:
                guard skipGroup(b, &cursor, end, number: number, depth: 0) else { return false }
                continue
            default:
                return false
            }
            for field in 0..<numbers.count where numbers[field] == number { values[field] = value }
        }
        return cursor == end
    }

    private func scanMessage(
        _ b: UnsafeBufferPointer<UInt8>,
        _ start: Int,
        _ end: Int,
        depth: Int,
        wanted: [Int],
        _ values: inout [ProtobufWireValue?]
    ) -> Bool {
        var cursor = start
        while cursor < end {
            guard let key = Self.varint(b, &cursor, end) else { return false }
            let number = key >> 3
            let wireType = key & 7
            guard number > 0 else { return false }
            let value: ProtobufWireValue
            switch wireType {
            case 0:
                guard let raw = Self.varint(b, &cursor, end) else { return false }
                value = .varint(raw)
            case 1:
                guard end - cursor >= 8 else { return false }
                value = .fixed64(Self.littleEndian(b, cursor, 8))
                cursor += 8
            case 5:
                guard end - cursor >= 4 else { return false }
                value = .fixed32(UInt32(truncatingIfNeeded: Self.littleEndian(b, cursor, 4)))
                cursor += 4
            case 2:
                guard let length = Self.varint(b, &cursor, end), length <= UInt64(end - cursor) else { return false }
                value = .bytes(start: cursor, end: cursor + Int(length))
                cursor += Int(length)
            case 3:
                guard Self.skipGroup(b, &cursor, end, number: number, depth: depth) else { return false }
                continue
            default:
                return false  // 4 (an end-group with no start) and the unused 6 and 7
            }
            var deeper: [Int] = []
            for index in wanted where paths[index][depth] == number {
                if paths[index].count == depth + 1 {
                    values[index] = value
                } else {
                    deeper.append(index)
                }
            }
            if !deeper.isEmpty, case .bytes(let inner, let innerEnd) = value, depth + 1 < Self.maxDepth {
                guard scanMessage(b, inner, innerEnd, depth: depth + 1, wanted: deeper, &values) else { return false }
            }
        }
        return cursor == end
    }

    /// Skips a (deprecated) group up to its matching end-group key.
    private static func skipGroup(
        _ b: UnsafeBufferPointer<UInt8>,
        _ cursor: inout Int,
        _ end: Int,
        number: UInt64,
        depth: Int
    ) -> Bool {
        guard depth < maxDepth else { return false }
        while cursor < end {
            guard let key = varint(b, &cursor, end) else { return false }
            switch key & 7 {
            case 0: guard varint(b, &cursor, end) != nil else { return false }
            case 1:
                guard end - cursor >= 8 else { return false }
                cursor += 8
            case 5:
                guard end - cursor >= 4 else { return false }
                cursor += 4
            case 2:
                guard let length = varint(b, &cursor, end), length <= UInt64(end - cursor) else { return false }
                cursor += Int(length)
            case 3: guard skipGroup(b, &cursor, end, number: key >> 3, depth: depth + 1) else { return false }
            case 4: return key >> 3 == number
            default: return false
            }
        }
        return false
    }

    /// A base-128 varint of at most 10 bytes; nil when it runs past `end` or is longer.
    static func varint(_ b: UnsafeBufferPointer<UInt8>, _ cursor: inout Int, _ end: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while cursor < end, shift < 64 {
            let byte = b[cursor]
            cursor += 1
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    private static func littleEndian(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> UInt64 {
        var value: UInt64 = 0
        for offset in (0..<count).reversed() { value = value << 8 | UInt64(b[start + offset]) }
        return value
    }
}
