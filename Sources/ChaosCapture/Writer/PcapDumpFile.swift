import CPcap
import ChaosCore
import Foundation

/// One pcap file written through libpcap (`pcap_open_dead` + `pcap_dump_open`): link type RAW
/// (IPv4/IPv6 without a link header), nanosecond timestamps. Needs no privileges.
final class PcapDumpFile: CaptureFile {
    /// The size of the pcap file header.
    static let fileHeaderBytes = 24
    /// The size of each packet record header.
    static let recordHeaderBytes = 16
    /// The snapshot length written into the file header.
    static let snapshotLength: Int32 = 262_144

    /// Where the file is.
    let path: String
    /// Bytes written so far, headers included.
    private(set) var bytesWritten: Int
    private let dead: OpaquePointer
    private let dumper: OpaquePointer
    private var closed = false

    /// Creates (truncates) `path` and writes the pcap file header.
    init(path: String) throws {
        guard
            let dead = pcap_open_dead_with_tstamp_precision(
                DLT_RAW,
                Self.snapshotLength,
                UInt32(PCAP_TSTAMP_PRECISION_NANO)
            )
        else {
            throw ChaosError(.io, "capture \(path): libpcap could not open a dead handle")
        }
        guard let dumper = pcap_dump_open(dead, path) else {
            let reason = String(cString: pcap_geterr(dead))
            pcap_close(dead)
            throw ChaosError(.io, "capture \(path): cannot create the file: \(reason)")
        }
        self.path = path
        self.dead = dead
        self.dumper = dumper
        self.bytesWritten = Self.fileHeaderBytes
    }

    deinit { close() }

    /// The bytes a packet of `count` bytes takes in the file (classic pcap has no comments: `comment` is not written).
    func recordBytes(packet count: Int, comment: String?) -> Int { Self.recordHeaderBytes + count }

    /// Appends one packet stamped `nanoseconds` after the Unix epoch (classic pcap cannot keep `comment`).
    func write(_ packet: UnsafeRawBufferPointer, epochNanoseconds nanoseconds: Int64, comment: String?) {
        guard !closed, let bytes = packet.baseAddress else { return }
        var header = pcap_pkthdr()
        header.ts.tv_sec = Int(nanoseconds / 1_000_000_000)
        // With nanosecond precision libpcap stores the fraction field unchanged: nanoseconds.
        header.ts.tv_usec = Int(nanoseconds % 1_000_000_000)
        header.caplen = UInt32(packet.count)
        header.len = UInt32(packet.count)
        pcap_dump(
            UnsafeMutableRawPointer(dumper).assumingMemoryBound(to: UInt8.self),
            &header,
            bytes.assumingMemoryBound(to: UInt8.self)
        )
        bytesWritten += Self.recordHeaderBytes + packet.count
    }

    /// Pushes buffered packets to the file.
    func flush() {
        guard !closed else { return }
        pcap_dump_flush(dumper)
    }

    /// Flushes and closes the file; later writes are ignored.
    func close() {
        guard !closed else { return }
        closed = true
        pcap_dump_close(dumper)
        pcap_close(dead)
    }
}
