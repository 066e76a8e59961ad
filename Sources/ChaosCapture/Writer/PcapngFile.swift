import ChaosCore
import Foundation

/// One capture file being written: classic pcap through libpcap (``PcapDumpFile``), or pcapng, which can say in the
/// file what it holds (``PcapngFile``).
protocol CaptureFile: AnyObject {
    /// Where the file is.
    var path: String { get }
    /// Bytes written so far, headers included.
    var bytesWritten: Int { get }
    /// The bytes a packet of `count` bytes with `comment` takes in the file.
    func recordBytes(packet count: Int, comment: String?) -> Int
    /// Appends one packet stamped `nanoseconds` after the Unix epoch, with a comment where the format keeps one.
    func write(_ packet: UnsafeRawBufferPointer, epochNanoseconds nanoseconds: Int64, comment: String?)
    /// Pushes buffered packets to the file.
    func flush()
    /// Flushes and closes the file; later writes are ignored.
    func close()
}

/// One pcapng file (the format Wireshark writes by default): a section header whose comment says what the capture
/// holds, one interface of link type RAW (IPv4/IPv6 without a link header) with nanosecond timestamps, and an
/// enhanced packet block per packet, which may carry a comment of its own. pcapng, unlike classic pcap, has
/// comments: that is how a capture of TLS connections says in the file that its payloads are decrypted.
final class PcapngFile: CaptureFile {
    /// The snapshot length written into the interface description.
    static let snapshotLength: UInt32 = 262_144
    /// pcapng's LINKTYPE_RAW.
    static let linkTypeRaw: UInt16 = 101
    /// The size of an enhanced packet block around its padded packet, without options.
    static let packetBlockOverhead = 32

    /// Where the file is.
    let path: String
    /// Bytes written so far, every block included.
    private(set) var bytesWritten = 0
    private var file: UnsafeMutablePointer<FILE>?
    private var block: [UInt8] = []

    /// Creates (truncates) `path` and writes the section header (with `comment`) and the interface description.
    init(path: String, comment: String) throws {
        guard let file = fopen(path, "wb") else {
            throw ChaosError(.io, "capture \(path): cannot create the file: \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.file = file
        setvbuf(file, nil, _IOFBF, 1 << 16)
        writeBlock(type: 0x0A0D_0D0A) { body in
            body.append(le: UInt32(0x1A2B_3C4D))  // byte-order magic
            body.append(le: UInt16(1))
            body.append(le: UInt16(0))  // version 1.0
            body.append(le: UInt64.max)  // section length: not given
            body.appendOption(1, Array(comment.utf8))  // opt_comment
            body.appendOption(4, Array("chaos".utf8))  // shb_userappl
            body.appendOption(0, [])  // opt_endofopt
        }
        writeBlock(type: 1) { body in
            body.append(le: Self.linkTypeRaw)
            body.append(le: UInt16(0))
            body.append(le: Self.snapshotLength)
            body.appendOption(9, [9])  // if_tsresol: 10^-9 s
            body.appendOption(0, [])
        }
    }

    deinit { close() }

    /// The bytes a packet of `count` bytes with `comment` takes in the file.
    func recordBytes(packet count: Int, comment: String?) -> Int {
        Self.packetBlockOverhead + Self.padded(count) + (comment.map { 4 + Self.padded($0.utf8.count) + 4 } ?? 0)
    }

    /// Appends one packet stamped `nanoseconds` after the Unix epoch, with an optional packet comment.
    func write(_ packet: UnsafeRawBufferPointer, epochNanoseconds nanoseconds: Int64, comment: String?) {
        guard file != nil else { return }
        let stamp = UInt64(bitPattern: nanoseconds)
        writeBlock(type: 6) { body in
            body.append(le: UInt32(0))  // interface 0
            body.append(le: UInt32(truncatingIfNeeded: stamp >> 32))
            body.append(le: UInt32(truncatingIfNeeded: stamp))
            body.append(le: UInt32(packet.count))
            body.append(le: UInt32(packet.count))
            body.append(contentsOf: packet)
            body.append(contentsOf: repeatElement(0, count: Self.padded(packet.count) - packet.count))
            if let comment {
                body.appendOption(1, Array(comment.utf8))
                body.appendOption(0, [])
            }
        }
    }

    /// Pushes buffered packets to the file.
    func flush() {
        if let file { fflush(file) }
    }

    /// Flushes and closes the file; later writes are ignored.
    func close() {
        guard let file else { return }
        fclose(file)
        self.file = nil
    }

    /// Writes one block: its type, total length, the body `fill` appends, the length again.
    private func writeBlock(type: UInt32, _ fill: (inout [UInt8]) -> Void) {
        block.removeAll(keepingCapacity: true)
        block.append(le: type)
        block.append(le: UInt32(0))  // the length, set below
        fill(&block)
        let length = UInt32(block.count + 4)
        block.append(le: length)
        withUnsafeBytes(of: length.littleEndian) { block.replaceSubrange(4..<8, with: $0) }
        _ = block.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        bytesWritten += block.count
    }

    static func padded(_ count: Int) -> Int { (count + 3) & ~3 }
}

extension Array where Element == UInt8 {
    fileprivate mutating func append<Integer: FixedWidthInteger>(le value: Integer) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// One option: its code, length, value, padding to 32 bits.
    fileprivate mutating func appendOption(_ code: UInt16, _ value: [UInt8]) {
        append(le: code)
        append(le: UInt16(value.count))
        append(contentsOf: value)
        append(contentsOf: repeatElement(0, count: PcapngFile.padded(value.count) - value.count))
    }
}
