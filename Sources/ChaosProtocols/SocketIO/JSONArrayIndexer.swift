/// An event's JSON array as an object keyed by index, `["tick",{"seq":1}]` → `{"0":"tick","1":{"seq":1}}`, so that the
/// audit's JSON scanner (which reads keys) finds `/1/seq` in it. The elements are copied as written; the split is one
/// pass that follows strings (and their escapes) and nesting, building nothing else.
enum JSONArrayIndexer {
    /// Writes the object for `bytes` into `out` (cleared first); false when `bytes` is not one JSON array.
    static func object(fromArray bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) -> Bool {
        out.removeAll(keepingCapacity: true)
        var index = 0
        while index < bytes.count, isSpace(bytes[index]) { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return false }
        index += 1
        out.append(UInt8(ascii: "{"))
        var element = 0
        var start = index
        var depth = 0
        var inString = false
        var escaped = false
        while index < bytes.count {
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
                    append(element, bytes, start..<index, to: &out)
                    out.append(UInt8(ascii: "}"))
                    return true
                }
                depth -= 1
            } else if byte == UInt8(ascii: ","), depth == 0 {
                append(element, bytes, start..<index, to: &out)
                element += 1
                start = index + 1
            }
            index += 1
        }
        return false
    }

    /// `"N":ELEMENT` (after a comma when not the first); an empty element (`[]`) adds nothing.
    private static func append(_ element: Int, _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, to out: inout [UInt8]) {
        var lower = range.lowerBound
        var upper = range.upperBound
        while lower < upper, isSpace(bytes[lower]) { lower += 1 }
        while upper > lower, isSpace(bytes[upper - 1]) { upper -= 1 }
        guard lower < upper else { return }
        if element > 0 { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: "\"\(element)\":".utf8)
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[lower..<upper]))
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 10 || byte == 13 }
}
