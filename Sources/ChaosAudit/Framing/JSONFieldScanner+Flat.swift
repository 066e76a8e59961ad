extension JSONFieldScanner {
    /// ``scan(_:into:)`` for the common case where every wanted field is a top-level key of at most eight bytes
    /// (`seq`, `stream`, `ack`, `type`): one pass with the cursor in a register, each key read as one word and
    /// compared with each wanted key in one comparison, strings skipped eight bytes at a time. The same answers as
    /// the general scan (it stops once every wanted field was found, and a later duplicate key is not looked at);
    /// nil when a key has escapes, which the general scan then reads.
    @inline(__always)
    func scanFlat(_ b: UnsafeBufferPointer<UInt8>, _ spans: UnsafeMutableBufferPointer<FieldSpan>, _ short: UnsafeBufferPointer<UInt64>)
        -> Bool?
    {
        let n = b.count
        guard let p = b.baseAddress else { return false }
        var remaining = activeCount
        var i = Self.skipSpace(b, 0)
        guard i < n, p[i] == UInt8(ascii: "{") else { return false }
        i = Self.skipSpace(b, i &+ 1)
        if i < n, p[i] == UInt8(ascii: "}") { return true }
        while true {
            guard i < n, p[i] == UInt8(ascii: "\"") else { return false }
            let keyStart = i &+ 1
            var keyEnd = Self.quoteOrBackslash(b, from: keyStart)
            while keyEnd < n, p[keyEnd] != UInt8(ascii: "\""), p[keyEnd] != UInt8(ascii: "\\") { keyEnd &+= 1 }
            guard keyEnd < n else { return false }
            if p[keyEnd] == UInt8(ascii: "\\") { return nil }
            let keyLength = keyEnd &- keyStart
            i = Self.skipSpace(b, keyEnd &+ 1)
            guard i < n, p[i] == UInt8(ascii: ":") else { return false }
            i = Self.skipSpace(b, i &+ 1)
            guard i < n else { return false }
            var leaf: UInt64 = 0
            if keyLength <= 8 {
                let word = Self.word(b, keyStart, keyLength)
                var bits = activeMask
                while bits != 0 {
                    let field = bits.trailingZeroBitCount
                    bits &= bits &- 1
                    if short[2 &* field &+ 1] == UInt64(keyLength), short[2 &* field] == word { leaf |= 1 << UInt64(field) }
                }
            }
            let valueStart = i
            if p[i] == UInt8(ascii: "\"") {
                guard let (end, escaped) = Self.skipString(b, &i) else { return false }
                if leaf != 0 {
                    assign(FieldSpan(start: valueStart &+ 1, end: end, isString: true, hasEscapes: escaped), leaf, spans, &remaining)
                }
            } else {
                guard Self.skipValue(b, &i) else { return false }
                if leaf != 0 { assign(FieldSpan(start: valueStart, end: i, isString: false, hasEscapes: false), leaf, spans, &remaining) }
            }
            if remaining == 0 { return true }
            i = Self.skipSpace(b, i)
            guard i < n else { return false }
            if p[i] == UInt8(ascii: ",") { i = Self.skipSpace(b, i &+ 1); continue }
            if p[i] == UInt8(ascii: "}") { return true }
            return false
        }
    }
}
