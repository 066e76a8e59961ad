extension JSONFieldScanner {
    /// ``scan(_:into:)`` for the common case where every wanted field is a top-level key of at most eight bytes
    /// (`seq`, `stream`, `ack`, `type`): one pass with the cursor in a register, each key read as one word and
    /// compared with each wanted key in one comparison, strings skipped eight bytes at a time. The same answers as
    /// the general scan (it stops once every wanted field was found, and a later duplicate key is not looked at);
    /// nil when a key has escapes, which the general scan then reads. `keys`: per field its key as a word and the
    /// key's length, then per key length 0...8 the fields whose key has it (``flatKeys``).
    @inline(__always)
    func scanFlat(
        _ b: UnsafeBufferPointer<UInt8>,
        _ spans: UnsafeMutableBufferPointer<FieldSpan>,
        _ keys: UnsafeBufferPointer<UInt64>,
        fields: Int
    ) -> Bool? {
        let n = b.count
        guard let p = b.baseAddress else { return false }
        var remaining = activeCount
        var i = Self.skipSpace(b, 0)
        guard i < n, p[i] == UInt8(ascii: "{") else { return false }
        i = Self.skipSpace(b, i &+ 1)
        if i < n, p[i] == UInt8(ascii: "}") { return true }
        var keyIndex = 0
        let raw = UnsafeRawPointer(p)
        while true {
            guard i < n, p[i] == UInt8(ascii: "\"") else { return false }
            var leaf: UInt64 = 0
            if keyIndex < predictionCount, i &+ 16 <= n,
                case let prediction = predictions[keyIndex],
                raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & prediction.lowMask == prediction.low,
                raw.loadUnaligned(fromByteOffset: i &+ 8, as: UInt64.self) & prediction.highMask == prediction.high
            {
                // The key the last message had here, quotes and colon included: what the search below would find.
                leaf = prediction.leaf
                i = Self.skipSpace(b, i &+ prediction.length)
            } else {
                let keyStart = i &+ 1
                var keyEnd = Self.quoteOrBackslash(b, from: keyStart)
                while keyEnd < n, p[keyEnd] != UInt8(ascii: "\""), p[keyEnd] != UInt8(ascii: "\\") { keyEnd &+= 1 }
                guard keyEnd < n else { return false }
                if p[keyEnd] == UInt8(ascii: "\\") { return nil }
                let keyLength = keyEnd &- keyStart
                i = Self.skipSpace(b, keyEnd &+ 1)
                guard i < n, p[i] == UInt8(ascii: ":") else { return false }
                // Only the fields whose key has this length are compared (most keys of a message are none of them).
                var bits = keyLength <= 8 ? keys[2 &* fields &+ keyLength] : 0
                if bits != 0 {
                    let word = Self.word(b, keyStart, keyLength)
                    repeat {
                        let field = bits.trailingZeroBitCount
                        bits &= bits &- 1
                        if keys[2 &* field] == word { leaf |= 1 << UInt64(field) }
                    } while bits != 0
                }
                predict(keyIndex, b, from: keyStart &- 1, through: i, leaf: leaf)
                i = Self.skipSpace(b, i &+ 1)
            }
            keyIndex &+= 1
            guard i < n else { return false }
            let valueStart = i
            let first = p[i]
            if first == UInt8(ascii: "\"") {
                guard let (end, escaped) = Self.skipString(b, &i) else { return false }
                if leaf != 0 {
                    assign(FieldSpan(start: valueStart &+ 1, end: end, isString: true, hasEscapes: escaped), leaf, spans, &remaining)
                }
            } else {
                if first &- UInt8(ascii: "0") < 10 || first == UInt8(ascii: "-") {
                    // A number (a seq, an ack), skipped here as ``skipValue(_:_:)`` would: digits first, then
                    // anything else up to the delimiter.
                    i &+= 1
                    while i < n, p[i] &- UInt8(ascii: "0") < 10 { i &+= 1 }
                    while i < n, !Self.endsValue(p[i]) { i &+= 1 }
                } else {
                    guard Self.skipValue(b, &i) else { return false }
                }
                if leaf != 0 { assign(FieldSpan(start: valueStart, end: i, isString: false, hasEscapes: false), leaf, spans, &remaining) }
            }
            if remaining == 0 { return true }
            i = Self.skipSpace(b, i)
            guard i < n else { return false }
            if p[i] == UInt8(ascii: ",") {
                i = Self.skipSpace(b, i &+ 1)
                continue
            }
            if p[i] == UInt8(ascii: "}") { return true }
            return false
        }
    }

    /// Learns that a message's key number `index` was `b[start...colon]` (its quotes and the colon right after, at most
    /// sixteen bytes) with fields `leaf`: the next message's key there is first compared with it. The predictions
    /// after it are dropped (the shape changed here); a key that does not fit ends the predictions at it.
    @inline(__always)
    func predict(_ index: Int, _ b: UnsafeBufferPointer<UInt8>, from start: Int, through colon: Int, leaf: UInt64) {
        guard index < Self.predictionCapacity else { return }
        let length = colon &+ 1 &- start
        guard length <= 16, start &+ 16 <= b.count, let base = b.baseAddress else {
            predictionCount = index
            return
        }
        let raw = UnsafeRawPointer(base)
        func mask(_ bytes: Int) -> UInt64 { bytes >= 8 ? .max : bytes <= 0 ? 0 : (1 << UInt64(bytes &* 8)) &- 1 }
        let lowMask = mask(length)
        let highMask = mask(length &- 8)
        predictions[index] = KeyPrediction(
            low: raw.loadUnaligned(fromByteOffset: start, as: UInt64.self) & lowMask,
            high: raw.loadUnaligned(fromByteOffset: start &+ 8, as: UInt64.self) & highMask,
            lowMask: lowMask,
            highMask: highMask,
            length: length,
            leaf: leaf
        )
        predictionCount = index &+ 1
    }
}

/// A key as the last message had it at one place: its bytes from the opening quote through the colon (at most
/// sixteen, as two masked little-endian words), how many, and the wanted fields it names.
struct KeyPrediction {
    var low: UInt64
    var high: UInt64
    var lowMask: UInt64
    var highMask: UInt64
    var length: Int
    var leaf: UInt64
}
