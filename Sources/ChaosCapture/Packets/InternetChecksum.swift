/// The Internet checksum (RFC 1071): a ones'-complement sum of 16-bit words.
///
/// The sum is byte-order independent (RFC 1071 §2(B)), so it is accumulated over native-order
/// 32-bit loads and the folded result is stored back in native order.
struct InternetChecksum {
    private var sum: UInt64 = 0

    /// Adds `bytes`. Every call but the last must add an even number of bytes.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        let count = bytes.count
        var index = 0
        var accumulator = sum
        while index + 4 <= count {
            accumulator &+= UInt64(bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self))
            index += 4
        }
        if index + 2 <= count {
            accumulator &+= UInt64(bytes.loadUnaligned(fromByteOffset: index, as: UInt16.self))
            index += 2
        }
        if index < count {
            // A trailing odd byte is the high-order byte of a big-endian word padded with zero:
            // in native (little-endian) order that is the low byte.
            accumulator &+= UInt64(littleEndianOddByte: bytes[index])
        }
        sum = accumulator
    }

    /// The complemented, folded checksum in native byte order, ready to be stored with
    /// `storeBytes(of:toByteOffset:as: UInt16.self)`.
    var value: UInt16 {
        var folded = sum
        while folded > 0xffff { folded = (folded & 0xffff) &+ (folded >> 16) }
        return ~UInt16(truncatingIfNeeded: folded)
    }
}

extension UInt64 {
    fileprivate init(littleEndianOddByte byte: UInt8) {
        let word = UInt16(byte) << 8
        self.init(UInt16(bigEndian: word))
    }
}
