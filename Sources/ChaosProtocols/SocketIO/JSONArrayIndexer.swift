/// An event's JSON array as an object keyed by index, `["tick",{"seq":1}]` → `{"0":"tick","1":{"seq":1}}`, so that the
/// audit's JSON scanner (which reads keys) finds `/1/seq` in it; or one element of it, in place. The elements are
/// copied as written (or not at all); the split is one pass that follows strings (and their escapes) and nesting,
/// building nothing else.
enum JSONArrayIndexer {
    /// Writes the object for `bytes` into `out` (cleared first); false when `bytes` is not one JSON array.
    static func object(fromArray bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) -> Bool {
        out.removeAll(keepingCapacity: true)
        out.append(UInt8(ascii: "{"))
        let isArray = forEachElement(of: bytes) { element, range in
            if element > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            appendDecimal(element, to: &out)
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[range]))
            return true
        }
        out.append(UInt8(ascii: "}"))
        return isArray
    }

    /// Where element `wanted` of the JSON array `bytes` lies (trimmed of spaces); nil when `bytes` is not a JSON array
    /// or has no such element.
    static func element(_ wanted: Int, ofArray bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var found: Range<Int>?
        let isArray = forEachElement(of: bytes) { element, range in
            if element == wanted { found = range }
            return element < wanted
        }
        return isArray ? found : nil
    }

    /// Where an event's name is, `["tick", …]`, between its quotes (escapes as written); nil when `bytes` does not
    /// begin as an array whose first element is a string.
    static func name(ofEvent bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        let count = bytes.count
        var index = 0
        while index < count, isSpace(bytes[index]) { index += 1 }
        guard index < count, bytes[index] == UInt8(ascii: "[") else { return nil }
        index += 1
        while index < count, isSpace(bytes[index]) { index += 1 }
        guard index < count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        index = start
        while true {
            index = skipPlainString(bytes, from: index)
            guard index < count else { return nil }
            if bytes[index] == UInt8(ascii: "\\") {
                index += 2
            } else if bytes[index] == UInt8(ascii: "\"") {
                return start..<index
            } else {
                index += 1
            }
        }
    }

    /// Where an event's arguments begin, `[name, arg1, …]`, to the array's closing bracket (trimmed): the first argument
    /// and any after it, found without reading the arguments (the name is skipped as the string it is, the end is found
    /// from the back). Enough for a reader that stops at the end of the value it reads, as the audit's JSON field
    /// scanner stops at the first argument's closing brace. Nil when `bytes` is not a string and another element in
    /// brackets (an event with no argument, a name that is not a string).
    static func arguments(ofEvent bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        let count = bytes.count
        guard let name = name(ofEvent: bytes) else { return nil }
        var index = name.upperBound + 1
        while index < count, isSpace(bytes[index]) { index += 1 }
        guard index < count, bytes[index] == UInt8(ascii: ",") else { return nil }
        index += 1
        while index < count, isSpace(bytes[index]) { index += 1 }
        var end = count
        while end > index, isSpace(bytes[end - 1]) { end -= 1 }
        guard end > index, bytes[end - 1] == UInt8(ascii: "]") else { return nil }
        end -= 1
        while end > index, isSpace(bytes[end - 1]) { end -= 1 }
        return end > index ? index..<end : nil
    }

    /// Calls `body` with each element's index and trimmed range, in order, while it returns true; returns whether
    /// `bytes` is one JSON array (as far as it was read). An empty array has no element.
    @inline(__always)
    private static func forEachElement(
        of bytes: UnsafeBufferPointer<UInt8>,
        _ body: (_ element: Int, _ range: Range<Int>) -> Bool
    ) -> Bool {
        var index = 0
        while index < bytes.count, isSpace(bytes[index]) { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return false }
        index += 1
        var element = 0
        var start = index
        var depth = 0
        var inString = false
        var escaped = false
        /// The element that ends at `end`: false when `body` wants no more.
        func ended(at end: Int) -> Bool {
            var lower = start
            var upper = end
            while lower < upper, isSpace(bytes[lower]) { lower += 1 }
            while upper > lower, isSpace(bytes[upper - 1]) { upper -= 1 }
            guard lower < upper else { return true }
            defer { element += 1 }
            return body(element, lower..<upper)
        }
        while index < bytes.count {
            if inString, !escaped { index = skipPlainString(bytes, from: index) }
            guard index < bytes.count else { break }
            let byte = bytes[index]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                depth += 1
            } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
                if depth == 0 {
                    guard byte == UInt8(ascii: "]") else { return false }
                    _ = ended(at: index)
                    return true
                }
                depth -= 1
            } else if byte == UInt8(ascii: ","), depth == 0 {
                guard ended(at: index) else { return true }
                start = index + 1
            }
            index += 1
        }
        return false
    }

    /// Where the next `"` or `\\` at or after `start` is in a string's bytes (or where fewer than eight bytes are left),
    /// eight bytes at a time.
    @inline(__always)
    private static func skipPlainString(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return start }
        var index = start
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while index + 8 <= bytes.count {
            let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let found = ((quote &- ones) & ~quote & highs) | ((backslash &- ones) & ~backslash & highs)
            if found != 0 { return index }
            index += 8
        }
        return index
    }

    /// Appends `value` (0 or more) in decimal, without making a String.
    private static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value >= 10 { appendDecimal(value / 10, to: &out) }
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 10 || byte == 13 }
}
