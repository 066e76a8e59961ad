import NIOCore
import NIOHPACK

/// One QPACK field section (RFC 9204 section 4.5: the payload of an HTTP/3 HEADERS frame), read with the static
/// table: indexed and literal field lines that name static entries, and literal names and values (Huffman-coded or
/// not). A line that names an entry of the dynamic table (whose inserts ride the connection's encoder stream, a
/// stream of its own) is counted in ``dynamicReferences`` and not read: its field is missing from ``fields``.
struct QPACKFieldSection {
    /// The fields read, in order (names as sent: HTTP/3 sends them lowercase).
    private(set) var fields: [(name: String, value: String)] = []
    /// The field lines that name the dynamic table.
    private(set) var dynamicReferences = 0

    /// Reads `bytes`, a whole field section, with a Huffman decoder of its own; throws ``QPACKProblem`` when they are
    /// not one.
    init(decoding bytes: [UInt8]) throws(QPACKProblem) {
        var huffman = QPACKHuffman()
        try self.init(decoding: bytes, huffman: &huffman)
    }

    /// Reads `bytes`, a whole field section, its Huffman-coded strings with `huffman` (one per session); throws
    /// ``QPACKProblem`` when they are not one.
    init(decoding bytes: [UInt8], huffman: inout QPACKHuffman) throws(QPACKProblem) {
        var reader = QPACKReader(bytes: bytes)
        // The prefix: Required Insert Count, then the sign bit and Delta Base (both only matter to the dynamic table).
        _ = try reader.integer(prefix: 8)
        _ = try reader.integer(prefix: 7)
        while let first = reader.peek() {
            if first & 0x80 != 0 {
                // 1T + index: an indexed field line.
                let isStatic = first & 0x40 != 0
                let index = try reader.integer(prefix: 6)
                if isStatic { fields.append(try Self.staticEntry(index)) } else { dynamicReferences += 1 }
            } else if first & 0x40 != 0 {
                // 01NT + index: a literal value with a name reference.
                let isStatic = first & 0x10 != 0
                let index = try reader.integer(prefix: 4)
                let value = try reader.string(prefix: 7, &huffman)
                if isStatic {
                    let name = try Self.staticEntry(index).name
                    fields.append((name, value))
                } else {
                    dynamicReferences += 1
                }
            } else if first & 0x20 != 0 {
                // 001NH + length: a literal name and a literal value.
                let name = try reader.string(prefix: 3, &huffman)
                let value = try reader.string(prefix: 7, &huffman)
                fields.append((name, value))
            } else if first & 0x10 != 0 {
                // 0001 + index: indexed with a post-base index (the dynamic table).
                _ = try reader.integer(prefix: 4)
                dynamicReferences += 1
            } else {
                // 0000N + index: a literal value with a post-base name reference (the dynamic table).
                _ = try reader.integer(prefix: 3)
                _ = try reader.string(prefix: 7, &huffman)
                dynamicReferences += 1
            }
        }
    }

    /// The value of the first field named `name`.
    func value(_ name: String) -> String? { fields.first { $0.name == name }?.value }

    private static func staticEntry(_ index: Int) throws(QPACKProblem) -> (name: String, value: String) {
        guard let entry = QPACKStaticTable.entry(index) else {
            throw QPACKProblem("static table index \(index), past its \(QPACKStaticTable.entries.count) entries")
        }
        return entry
    }
}

/// Why bytes are not a QPACK field section.
struct QPACKProblem: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}

/// Prefixed integers and string literals (RFC 9204 section 4.1, as RFC 7541 section 5 defines them) in a field section.
struct QPACKReader {
    /// Integers past this are refused (a field section's indexes and lengths are far smaller).
    static let integerLimit = 1 << 32
    let bytes: [UInt8]
    private(set) var position = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The next byte, nil at the end.
    func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    /// An integer with an N-bit prefix (the byte's bits above the prefix are the caller's).
    mutating func integer(prefix bits: Int) throws(QPACKProblem) -> Int {
        guard let first = peek() else { throw QPACKProblem("the section ends inside a field line") }
        position += 1
        let mask = (1 << bits) - 1
        var value = Int(first) & mask
        guard value == mask else { return value }
        var shift = 0
        while true {
            guard let byte = peek() else { throw QPACKProblem("the section ends inside an integer") }
            position += 1
            // Past 2^32 (a value, or continuation bytes that only pad one out): refused before a shift can overflow.
            guard shift <= 28 else { throw QPACKProblem("an integer over 2^32") }
            value += Int(byte & 0x7F) << shift
            guard value < Self.integerLimit else { throw QPACKProblem("an integer over 2^32") }
            shift += 7
            if byte & 0x80 == 0 { return value }
        }
    }

    /// A string literal whose Huffman flag is the bit just above its length's N-bit prefix.
    mutating func string(prefix bits: Int, _ huffman: inout QPACKHuffman) throws(QPACKProblem) -> String {
        guard let first = peek() else { throw QPACKProblem("the section ends before a string") }
        let isHuffman = first & UInt8(1 << bits) != 0
        let length = try integer(prefix: bits)
        guard length <= bytes.count - position else {
            throw QPACKProblem("a string of \(length) bytes, past the section's end")
        }
        let raw = bytes[position..<(position + length)]
        position += length
        if isHuffman { return try huffman.decode(raw) }
        return String(decoding: raw, as: UTF8.self)
    }
}

/// Huffman-coded strings (the code of RFC 7541 Appendix B, which QPACK shares), decoded by NIOHPACK: the string is
/// put in an HPACK literal field line of its own and read back as its value. The HPACK decoder (and its table, which
/// such a line never fills) is made at the first string and kept: one per session, not one per string.
struct QPACKHuffman {
    private var decoder: HPACKDecoder?
    private var block = ByteBuffer()

    /// The string `coded` stands for.
    mutating func decode(_ coded: ArraySlice<UInt8>) throws(QPACKProblem) -> String {
        block.clear()
        block.reserveCapacity(coded.count + 8)
        // A literal field line without indexing, with a new name ("h", not coded), then the coded value.
        block.writeBytes([0x00, 0x01, UInt8(ascii: "h")])
        Self.writeLength(coded.count, into: &block)
        block.writeBytes(coded)
        var decoder =
            self.decoder
            ?? HPACKDecoder(
                allocator: ByteBufferAllocator(),
                maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
                maxHeaderListSize: Int(Int32.max)
            )
        self.decoder = nil  // moved out while it decodes: no copy of its table
        defer { self.decoder = decoder }
        do {
            let headers = try decoder.decodeHeaders(from: &block)
            for header in headers { return header.value }
        } catch {}
        throw QPACKProblem("a Huffman-coded string of \(coded.count) bytes that does not decode")
    }

    /// `length` as an HPACK string length: the Huffman flag set, a 7-bit prefix.
    private static func writeLength(_ length: Int, into block: inout ByteBuffer) {
        guard length >= 0x7F else {
            block.writeInteger(UInt8(0x80 | length))
            return
        }
        block.writeInteger(UInt8(0xFF))
        var rest = length - 0x7F
        while rest >= 0x80 {
            block.writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        block.writeInteger(UInt8(rest))
    }
}
