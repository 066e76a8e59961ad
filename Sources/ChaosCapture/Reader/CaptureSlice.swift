import CPcap
import ChaosCore
import Foundation

/// The packets of a capture file between two instants, written to a new file of the same link type (libpcap reads
/// and writes; nothing is decoded): what a bundle carries instead of a soak's whole capture.
package enum CaptureSlice {
    /// Writes the packets of `source` stamped from `from` through `through` (nanoseconds since the Unix epoch) to
    /// `destination` (classic pcap); returns how many. A capture libpcap cannot read is bad input naming the file.
    @discardableResult
    package static func write(from source: String, to destination: String, from start: Int64, through end: Int64) throws -> Int {
        var errorBuffer = [CChar](repeating: 0, count: Int(PCAP_ERRBUF_SIZE) + 1)
        guard let handle = pcap_open_offline_with_tstamp_precision(source, UInt32(PCAP_TSTAMP_PRECISION_NANO), &errorBuffer) else {
            let reason = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw ChaosError.badInput("capture \(source): not a readable pcap or pcapng file (\(reason))")
        }
        defer { pcap_close(handle) }
        guard let dumper = pcap_dump_open(handle, destination) else {
            throw ChaosError(.io, "capture slice \(destination): \(String(cString: pcap_geterr(handle)))")
        }
        defer { pcap_dump_close(dumper) }
        var header: UnsafeMutablePointer<pcap_pkthdr>?
        var data: UnsafePointer<UInt8>?
        var written = 0
        while true {
            let status = pcap_next_ex(handle, &header, &data)
            if status == PCAP_ERROR_BREAK { break }
            guard status == 1 else { throw ChaosError.badInput("capture \(source): \(String(cString: pcap_geterr(handle)))") }
            guard let header, let data else { continue }
            // Nanosecond precision was asked for: tv_usec holds nanoseconds.
            let time = Int64(header.pointee.ts.tv_sec) &* 1_000_000_000 &+ Int64(header.pointee.ts.tv_usec)
            guard time >= start else { continue }
            if time > end { continue }  // a merged capture need not be in time order
            pcap_dump(UnsafeMutableRawPointer(dumper).assumingMemoryBound(to: UInt8.self), header, data)
            written += 1
        }
        return written
    }
}
