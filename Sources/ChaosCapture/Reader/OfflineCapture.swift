import CPcap
import ChaosCore
import Foundation

/// A pcap or pcapng file opened through libpcap (`pcap_open_offline`), with an optional BPF
/// filter. Every libpcap failure becomes a `ChaosError.badInput` naming the file and byte offset.
final class OfflineCapture {
    let path: String
    private let handle: OpaquePointer
    private let isClassicPcap: Bool
    /// Where the next classic-pcap record starts (pcapng offsets come from the stream position).
    private var recordOffset = 24

    init(path: String) throws {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw ChaosError.badInput("capture \(path): no such readable file")
        }
        var errorBuffer = [CChar](repeating: 0, count: Int(PCAP_ERRBUF_SIZE) + 1)
        guard
            let handle = pcap_open_offline_with_tstamp_precision(
                path,
                UInt32(PCAP_TSTAMP_PRECISION_NANO),
                &errorBuffer
            )
        else {
            let reason = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw ChaosError.badInput("capture \(path): not a readable pcap or pcapng file (\(reason)) at byte offset 0")
        }
        self.path = path
        self.handle = handle
        let magic = Self.magic(of: path)
        isClassicPcap = magic != 0x0a0d_0d0a
    }

    deinit { pcap_close(handle) }

    /// The libpcap `DLT_` value of the file's link layer.
    var dataLinkType: Int32 { pcap_datalink(handle) }

    /// Keeps only packets matching the BPF `expression`.
    func setFilter(_ expression: String) throws {
        var program = bpf_program()
        guard pcap_compile(handle, &program, expression, 1, PCAP_NETMASK_UNKNOWN) == 0 else {
            throw ChaosError.badInput("capture filter '\(expression)': \(lastError)")
        }
        defer { pcap_freecode(&program) }
        guard pcap_setfilter(handle, &program) == 0 else {
            throw ChaosError.badInput("capture filter '\(expression)': \(lastError)")
        }
    }

    /// Calls `body` with each packet (its captured bytes, original length and timestamp in
    /// nanoseconds since the epoch) until the end of the file.
    func forEachPacket(_ body: (UnsafeRawBufferPointer, Int, Int64) throws -> Void) throws {
        var header: UnsafeMutablePointer<pcap_pkthdr>?
        var data: UnsafePointer<UInt8>?
        while true {
            let status = pcap_next_ex(handle, &header, &data)
            switch status {
            case 1:
                guard let header, let data else { continue }
                let length = Int(header.pointee.caplen)
                recordOffset += 16 + length
                let time = Int64(header.pointee.ts.tv_sec) &* 1_000_000_000 &+ Int64(header.pointee.ts.tv_usec)
                try body(UnsafeRawBufferPointer(start: data, count: length), Int(header.pointee.len), time)
            case PCAP_ERROR_BREAK:
                return
            default:
                throw ChaosError.badInput("capture \(path): \(lastError) at byte offset \(failureOffset)")
            }
        }
    }

    private var failureOffset: Int {
        if isClassicPcap { return recordOffset }
        guard let file = pcap_file(handle) else { return 0 }
        return ftell(file)
    }

    private var lastError: String { String(cString: pcap_geterr(handle)) }

    /// The first four bytes of the file, as a little-endian number (0 when unreadable).
    private static func magic(of path: String) -> UInt32 {
        guard let file = FileHandle(forReadingAtPath: path) else { return 0 }
        defer { try? file.close() }
        let bytes = [UInt8]((try? file.read(upToCount: 4)) ?? Data())
        guard bytes.count == 4 else { return 0 }
        return bytes.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
}
