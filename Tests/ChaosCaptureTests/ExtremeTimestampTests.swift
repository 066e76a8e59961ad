import ChaosCapture
import ChaosCore
import Foundation
import Testing

/// pcapng timestamps are 64-bit: a clock near the ends of Int64 nanoseconds, or one that jumps back, reads.
@Suite("Captures with extreme timestamps")
struct ExtremeTimestampTests {
    /// A little-endian pcapng: section header, one raw-IP interface, one enhanced packet block per packet.
    static func pcapng(_ packets: [(microseconds: UInt64, bytes: [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        func u32(_ v: UInt32) { out += withUnsafeBytes(of: v.littleEndian, Array.init) }
        func u16(_ v: UInt16) { out += withUnsafeBytes(of: v.littleEndian, Array.init) }
        u32(0x0A0D_0D0A)
        u32(28)
        u32(0x1A2B_3C4D)
        u16(1)
        u16(0)
        u32(0xFFFF_FFFF)
        u32(0xFFFF_FFFF)
        u32(28)
        u32(1)
        u32(20)
        u16(101)
        u16(0)
        u32(65535)
        u32(20)
        for packet in packets {
            let padded = (packet.bytes.count + 3) / 4 * 4
            let length = UInt32(32 + padded)
            u32(6)
            u32(length)
            u32(0)
            u32(UInt32(packet.microseconds >> 32))
            u32(UInt32(packet.microseconds & 0xFFFF_FFFF))
            u32(UInt32(packet.bytes.count))
            u32(UInt32(packet.bytes.count))
            out += packet.bytes + [UInt8](repeating: 0, count: padded - packet.bytes.count)
            u32(length)
        }
        return out
    }

    /// An IPv4 TCP segment from 10.0.0.1:`sourcePort` to 10.0.0.2:`destinationPort`.
    static func segment(_ sourcePort: UInt16, _ destinationPort: UInt16, flags: UInt8, sequence: UInt32, payload: [UInt8] = []) -> [UInt8] {
        let total = 40 + payload.count
        var ip: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]
        if sourcePort > destinationPort { ip.swapAt(15, 19) }
        let tcp: [UInt8] =
            [UInt8(sourcePort >> 8), UInt8(sourcePort & 0xFF), UInt8(destinationPort >> 8), UInt8(destinationPort & 0xFF)]
            + withUnsafeBytes(of: sequence.bigEndian, Array.init) + [0, 0, 0, 0, 0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]
        return ip + tcp + payload
    }

    @Test("timestamps that wrap Int64 nanoseconds, or jump back, give times within 0...2^62 and no trap")
    func extremeTimestamps() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("extreme-\(UUID().uuidString).pcapng").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let message = Array("{\"seq\":1}\n".utf8)
        let bytes = Self.pcapng([
            (9_223_372_037 * 1_000_000, Self.segment(40000, 80, flags: 0x02, sequence: 1)),
            (9_223_372_036 * 1_000_000, Self.segment(80, 40000, flags: 0x12, sequence: 500)),
            (UInt64.max / 2, Self.segment(40000, 80, flags: 0x18, sequence: 2, payload: message)),
            (0, Self.segment(40000, 80, flags: 0x11, sequence: 2 + UInt32(message.count))),
        ])
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let (events, statistics) = try CaptureReader.readAll(path: path)
        #expect(statistics.packets == 4)
        #expect(events.allSatisfy { $0.time >= 0 && $0.time <= 1 << 62 })
        #expect(events.contains { if case .read(.client, message) = $0.kind { true } else { false } })
    }
}
