import Foundation

/// Where one field's value lies inside a frame.
struct FieldSpan: Equatable {
    /// First byte of the value (inside the quotes for a string); -1 when the field is absent.
    var start: Int
    /// One past the last byte of the value.
    var end: Int
    /// The value was a JSON string.
    var isString: Bool
    /// The string contains backslash escapes (its bytes are not its text).
    var hasEscapes: Bool

    static let missing = FieldSpan(start: -1, end: -1, isString: false, hasEscapes: false)
    var isPresent: Bool { start >= 0 }
}

/// Finds a few fields (top-level keys or JSON pointers like `/meta/seq`) in a JSON object by scanning
/// its bytes once, without building any objects: the per-message hot path of the audit.
///
/// It is not a validator: it stops as soon as every wanted field was found, and skips values it does not
/// need by matching brackets and strings (with escapes). A class: the extractor reads it once per message, and a
/// reference costs one retain where a struct of arrays cost one per array.
final class JSONFieldScanner {
    /// How many fields are scanned for (wanted or placeholders).
    private let fieldCount: Int

    /// The fields actually wanted (an empty name is a placeholder that is never looked for).
    let activeMask: UInt64
    let activeCount: Int

    /// Every path component's bytes, one after another (read through ``Keys`` on the hot path: no array of arrays,
    /// so no reference counting per key compared).
    private let keyBytes: [UInt8]
    /// Per field `f`: `layout[2f]` its first component's index, `layout[2f + 1]` its depth; then per component `c`
    /// (after the fields): its start in `keyBytes` and its length.
    private let layout: [Int]

    /// `names` are keys (`seq`) or JSON pointers (`/meta/seq`, with `~1` for `/` and `~0` for `~`); an empty
    /// name keeps its slot but is not looked for. At most 64 fields.
    init(fields names: [String]) {
        // Each wanted field as path components (unescaped key bytes), laid out flat below.
        let paths = names.map(Self.components)
        fieldCount = paths.count
        var mask: UInt64 = 0
        for (index, name) in names.enumerated() where !name.isEmpty && index < 64 { mask |= 1 << UInt64(index) }
        activeMask = mask
        activeCount = mask.nonzeroBitCount
        var bytes: [UInt8] = []
        var fieldLayout: [Int] = []
        var componentLayout: [Int] = []
        for path in paths {
            fieldLayout += [componentLayout.count / 2, path.count]
            for component in path {
                componentLayout += [bytes.count, component.count]
                bytes += component
            }
        }
        keyBytes = bytes
        layout = fieldLayout + componentLayout
        let short = paths.flatMap { path -> [UInt64] in
            guard path.count == 1, path[0].count <= 8 else { return [0, UInt64.max] }
            return path[0].withUnsafeBufferPointer { [Self.word($0, 0, $0.count), UInt64($0.count)] }
        }
        allShort = (0..<paths.count).allSatisfy { mask & (1 << UInt64($0)) == 0 || short[2 * $0 + 1] != .max }
        var byLength = [UInt64](repeating: 0, count: 9)
        for field in 0..<paths.count where mask & (1 << UInt64(field)) != 0 && short[2 * field + 1] != .max {
            byLength[Int(short[2 * field + 1])] |= 1 << UInt64(field)
        }
        flatKeys = .allocate(capacity: short.count + 9)
        _ = flatKeys.initialize(from: short + byLength)
        spans = .allocate(capacity: max(paths.count, 1))
        spans.initialize(repeating: .missing)
        predictions = .allocate(capacity: Self.predictionCapacity)
    }

    deinit {
        flatKeys.deallocate()
        spans.deallocate()
        predictions.deallocate()
    }

    /// How many of a message's first keys are predicted.
    static let predictionCapacity = 16
    /// The last message's first keys, in order (``scanFlat(_:_:_:fields:)``: messages of one producer mostly share
    /// their keys' order, so a key is mostly one masked comparison of sixteen bytes).
    let predictions: UnsafeMutablePointer<KeyPrediction>
    /// How many of ``predictions`` hold.
    var predictionCount = 0

    /// Where the last ``scan(_:)`` found each wanted field (one span per field, in order; ``FieldSpan/missing`` when
    /// absent): the scanner's own buffer, valid until the next scan.
    let spans: UnsafeMutableBufferPointer<FieldSpan>

    /// Every wanted field is a top-level key of at most eight bytes: ``scanFlat(_:_:_:fields:)`` reads them.
    private let allShort: Bool

    /// Per field `f`: a top-level key of at most eight bytes as one little-endian word (`flatKeys[2f]`) and its
    /// length (`flatKeys[2f + 1]`; `UInt64.max` for a longer key or a path): most keys match in one comparison. Then,
    /// for each key length 0...8, the wanted fields with a short key of that length (a bit per field). In memory the
    /// scanner owns: both scans read it with no array access per key.
    private let flatKeys: UnsafeMutableBufferPointer<UInt64>

    /// The bytes `b[start..<start + length]` (length at most 8) as a little-endian word, zero above them.
    @inline(__always)
    static func word(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ length: Int) -> UInt64 {
        if start &+ 8 <= b.count, let base = b.baseAddress {
            let all = UnsafeRawPointer(base).loadUnaligned(fromByteOffset: start, as: UInt64.self)
            return length == 8 ? all : all & ((1 << UInt64(length &* 8)) &- 1)
        }
        var value: UInt64 = 0
        var index = length
        while index > 0 {
            index &-= 1
            value = value << 8 | UInt64(b[start &+ index])
        }
        return value
    }

    static func components(_ name: String) -> [[UInt8]] {
        guard name.hasPrefix("/") else { return [Array(name.utf8)] }
        return name.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
            Array($0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~").utf8)
        }
    }

    /// The wanted keys, borrowed for one scan.
    private struct Keys {
        let bytes: UnsafeBufferPointer<UInt8>
        let layout: UnsafeBufferPointer<Int>
        let fields: Int
        let short: UnsafeBufferPointer<UInt64>

        /// How many components field `field`'s path has.
        @inline(__always)
        func depth(_ field: Int) -> Int { layout[2 &* field &+ 1] }

        /// Whether the key `b[start..<end]` is component `level` of field `field`'s path.
        @inline(__always)
        func matches(_ field: Int, _ level: Int, _ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ escaped: Bool) -> Bool {
            let component = 2 &* fields &+ 2 &* (layout[2 &* field] &+ level)
            let keyStart = layout[component]
            let keyLength = layout[component &+ 1]
            let key = UnsafeBufferPointer(rebasing: bytes[keyStart..<(keyStart &+ keyLength)])
            if escaped { return JSONFieldScanner.unescape(b, start, end).elementsEqual(key) }
            guard end &- start == keyLength else { return false }
            // Keys are short: a loop here beats a call to memcmp.
            var index = 0
            while index < keyLength {
                guard b[start &+ index] == key[index] else { return false }
                index &+= 1
            }
            return true
        }
    }

    /// Fills ``spans``. Returns false when `frame` is not a JSON object. `flat` false: the general scan only (what
    /// the tests hold the flat pass to).
    func scan(_ frame: UnsafeBufferPointer<UInt8>, flat: Bool = true) -> Bool {
        let fields = fieldCount
        let spans = spans
        for index in 0..<fields { spans[index] = .missing }
        if flat, allShort, let found = scanFlat(frame, spans, UnsafeBufferPointer(flatKeys), fields: fields) { return found }
        for index in 0..<fields { spans[index] = .missing }
        var cursor = Self.skipSpace(frame, 0)
        guard cursor < frame.count, frame[cursor] == UInt8(ascii: "{") else { return false }
        var remaining = activeCount
        return keyBytes.withUnsafeBufferPointer { bytes in
            layout.withUnsafeBufferPointer { layout in
                let keys = Keys(bytes: bytes, layout: layout, fields: fields, short: UnsafeBufferPointer(flatKeys))
                return scanObject(frame, &cursor, level: 0, wanted: activeMask, keys, spans, &remaining)
            }
        }
    }

    private func scanObject(
        _ b: UnsafeBufferPointer<UInt8>,
        _ i: inout Int,
        level: Int,
        wanted: UInt64,
        _ keys: Keys,
        _ spans: UnsafeMutableBufferPointer<FieldSpan>,
        _ remaining: inout Int
    ) -> Bool {
        i += 1  // '{'
        i = Self.skipSpace(b, i)
        if i < b.count, b[i] == UInt8(ascii: "}") {
            i += 1
            return true
        }
        while true {
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { return false }
            let keyStart = i + 1
            guard let (keyEnd, keyEscaped) = Self.skipString(b, &i) else { return false }
            i = Self.skipSpace(b, i)
            guard i < b.count, b[i] == UInt8(ascii: ":") else { return false }
            i = Self.skipSpace(b, i + 1)
            guard i < b.count else { return false }
            var leaf: UInt64 = 0
            var deeper: UInt64 = 0
            var bits = wanted
            let keyLength = keyEnd &- keyStart
            let keyWord = level == 0 && !keyEscaped && keyLength <= 8 ? Self.word(b, keyStart, keyLength) : 0
            while bits != 0 {
                let field = bits.trailingZeroBitCount
                bits &= bits - 1
                if level == 0, !keyEscaped, keys.short[2 &* field &+ 1] != .max {
                    if UInt64(keyLength) == keys.short[2 &* field &+ 1], keyWord == keys.short[2 &* field] { leaf |= 1 << UInt64(field) }
                    continue
                }
                let depth = keys.depth(field)
                if level < depth, keys.matches(field, level, b, keyStart, keyEnd, keyEscaped) {
                    if depth == level + 1 { leaf |= 1 << UInt64(field) } else { deeper |= 1 << UInt64(field) }
                }
            }
            if leaf != 0 {
                let isString = b[i] == UInt8(ascii: "\"")
                let valueStart = isString ? i + 1 : i
                var escaped = false
                if isString {
                    guard let (end, hasEscapes) = Self.skipString(b, &i) else { return false }
                    escaped = hasEscapes
                    assign(FieldSpan(start: valueStart, end: end, isString: true, hasEscapes: escaped), leaf, spans, &remaining)
                } else {
                    guard Self.skipValue(b, &i) else { return false }
                    assign(FieldSpan(start: valueStart, end: i, isString: false, hasEscapes: false), leaf, spans, &remaining)
                }
            } else if deeper != 0, b[i] == UInt8(ascii: "{") {
                guard scanObject(b, &i, level: level + 1, wanted: deeper, keys, spans, &remaining) else { return false }
            } else {
                guard Self.skipValue(b, &i) else { return false }
            }
            if remaining == 0 { return true }
            i = Self.skipSpace(b, i)
            guard i < b.count else { return false }
            if b[i] == UInt8(ascii: ",") {
                i = Self.skipSpace(b, i + 1)
                continue
            }
            if b[i] == UInt8(ascii: "}") {
                i += 1
                return true
            }
            return false
        }
    }

    @inline(__always)
    func assign(_ span: FieldSpan, _ fields: UInt64, _ spans: UnsafeMutableBufferPointer<FieldSpan>, _ remaining: inout Int) {
        var bits = fields
        while bits != 0 {
            let field = bits.trailingZeroBitCount
            bits &= bits - 1
            if !spans[field].isPresent { remaining -= 1 }
            spans[field] = span
        }
    }

    @inline(__always)
    static func skipSpace(_ b: UnsafeBufferPointer<UInt8>, _ start: Int) -> Int {
        var i = start
        while i < b.count {
            let c = b[i]
            guard c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { break }
            i += 1
        }
        return i
    }

    /// `i` at the opening quote; leaves `i` after the closing quote; returns the end of the contents.
    @inline(__always)
    static func skipString(_ b: UnsafeBufferPointer<UInt8>, _ i: inout Int) -> (end: Int, escaped: Bool)? {
        var j = i + 1
        var escaped = false
        let count = b.count
        // Eight bytes at a time to the first quote or backslash (a payload's plain text, a key).
        j = Self.quoteOrBackslash(b, from: j)
        while j < count {
            let c = b[j]
            if c == UInt8(ascii: "\"") {
                i = j + 1
                return (j, escaped)
            }
            if c == UInt8(ascii: "\\") {
                escaped = true
                j += 2
                continue
            }
            j += 1
        }
        return nil
    }

    /// The high bit of each byte of `word` that equals the byte repeated in `pattern` (the classic has-zero-byte test
    /// on their XOR); bytes above the first such byte may be marked falsely, so only the lowest mark is exact.
    @inline(__always)
    static func bytesEqual(_ word: UInt64, _ pattern: UInt64) -> UInt64 {
        let x = word ^ pattern
        return (x &- 0x0101_0101_0101_0101) & ~x & 0x8080_8080_8080_8080
    }

    /// The index of the first quote or backslash at or after `start`, read eight bytes at a time while eight remain
    /// (`start` itself, or a later index, when fewer do: the caller's byte loop goes on from there).
    @inline(__always)
    static func quoteOrBackslash(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = b.baseAddress else { return start }
        let raw = UnsafeRawPointer(base)
        var j = start
        while j &+ 8 <= b.count {
            let word = raw.loadUnaligned(fromByteOffset: j, as: UInt64.self)
            let marks = bytesEqual(word, 0x2222_2222_2222_2222) | bytesEqual(word, 0x5C5C_5C5C_5C5C_5C5C)
            if marks != 0 { return j &+ marks.trailingZeroBitCount >> 3 }
            j &+= 8
        }
        return j
    }

    /// Skips any value (string, number, literal, object, array) starting at `i`.
    static func skipValue(_ b: UnsafeBufferPointer<UInt8>, _ i: inout Int) -> Bool {
        guard i < b.count else { return false }
        let first = b[i]
        if first == UInt8(ascii: "\"") { return skipString(b, &i) != nil }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
            var depth = 0
            while i < b.count {
                let c = b[i]
                if c == UInt8(ascii: "\"") {
                    guard skipString(b, &i) != nil else { return false }
                    continue
                }
                if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
                    depth += 1
                } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 {
                        i += 1
                        return true
                    }
                }
                i += 1
            }
            return false
        }
        let start = i
        while i < b.count, !endsValue(b[i]) { i += 1 }
        return i > start
    }

    /// Whether `c` ends a number or a literal: a comma, a closing bracket or white space.
    @inline(__always)
    static func endsValue(_ c: UInt8) -> Bool {
        c == UInt8(ascii: ",") || c == UInt8(ascii: "}") || c == UInt8(ascii: "]") || c == 0x20 || c == 0x0A || c == 0x0D
            || c == 0x09
    }

    /// The text of a JSON string's contents (`\n`, `\"`, `\u00e9`, surrogate pairs) as UTF-8 bytes.
    static func unescape(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(end - start)
        var i = start
        func hex(_ at: Int) -> UInt32? {
            guard at + 4 <= end else { return nil }
            var value: UInt32 = 0
            for k in at..<(at + 4) {
                let c = b[k]
                let digit: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
        while i < end {
            let c = b[i]
            guard c == UInt8(ascii: "\\"), i + 1 < end else {
                out.append(c)
                i += 1
                continue
            }
            let e = b[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                guard var scalar = hex(i) else {
                    out.append(e)
                    continue
                }
                i += 4
                if (0xD800..<0xDC00).contains(scalar), i + 6 <= end, b[i] == UInt8(ascii: "\\"),
                    b[i + 1] == UInt8(ascii: "u"), let low = hex(i + 2), (0xDC00..<0xE000).contains(low)
                {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out.append(contentsOf: Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
            default: out.append(e)
            }
        }
        return out
    }

    /// The integer in a span (`42`, `-3`, or a string of digits `"42"`); nil for anything else.
    @inline(__always)
    static func integer(_ b: UnsafeBufferPointer<UInt8>, _ span: FieldSpan) -> Int64? {
        guard span.isPresent, span.end > span.start, !span.hasEscapes else { return nil }
        var i = span.start
        var negative = false
        if b[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        guard i < span.end, span.end - i <= 18 else { return nil }
        // At most 18 digits: the value cannot overflow, so no checked arithmetic per digit.
        guard let p = b.baseAddress else { return nil }
        var value: Int64 = 0
        while i < span.end {
            let digit = p[i] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value &* 10 &+ Int64(digit)
            i &+= 1
        }
        return negative ? -value : value
    }
}
