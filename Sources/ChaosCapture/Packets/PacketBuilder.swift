/// Builds raw IPv4/IPv6 + TCP packets (link type RAW) with correct lengths and checksums into one
/// reused buffer, so writing a packet allocates nothing.
struct PacketBuilder {
    /// The largest TCP payload of one synthesized segment: an IPv4 packet of 65,535 bytes.
    static let maximumPayload = 65_535 - 20 - 20

    /// The window scale announced in SYNs, so the fixed 65,535 window means 8 MiB.
    static let windowScale: UInt8 = 7

    private var buffer: [UInt8]
    private var ipIdentification: UInt16 = 1

    init() {
        buffer = [UInt8](repeating: 0, count: 40 + 24 + Self.maximumPayload + 40)
    }

    /// Builds one segment from `source` to `destination` and hands its bytes to `body`.
    /// Both endpoints must have the same address family.
    mutating func withSegment<Result>(
        from source: IPEndpoint,
        to destination: IPEndpoint,
        sequence: UInt32,
        acknowledgement: UInt32,
        flags: TCPFlags,
        payload: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> Result
    ) rethrows -> Result {
        precondition(payload.count <= Self.maximumPayload, "segment payload too large")
        let isIPv6 = source.isIPv6
        let ipHeaderLength = isIPv6 ? 40 : 20
        let options: [UInt8] = flags.contains(.syn) ? [1, 3, 3, Self.windowScale] : []
        let tcpHeaderLength = 20 + options.count
        let tcpLength = tcpHeaderLength + payload.count
        let total = ipHeaderLength + tcpLength
        let identification = ipIdentification
        ipIdentification &+= 1

        return try buffer.withUnsafeMutableBytes { raw in
            // IP header.
            if isIPv6 {
                raw.storeBytes(of: UInt32(0x6000_0000).bigEndian, toByteOffset: 0, as: UInt32.self)
                raw.storeBytes(of: UInt16(tcpLength).bigEndian, toByteOffset: 4, as: UInt16.self)
                raw[6] = 6  // next header: TCP
                raw[7] = 64  // hop limit
                Self.copy(source.address, into: raw, at: 8)
                Self.copy(destination.address, into: raw, at: 24)
            } else {
                raw[0] = 0x45
                raw[1] = 0
                raw.storeBytes(of: UInt16(total).bigEndian, toByteOffset: 2, as: UInt16.self)
                raw.storeBytes(of: identification.bigEndian, toByteOffset: 4, as: UInt16.self)
                raw.storeBytes(of: UInt16(0x4000).bigEndian, toByteOffset: 6, as: UInt16.self)  // DF
                raw[8] = 64  // TTL
                raw[9] = 6  // TCP
                raw.storeBytes(of: UInt16(0), toByteOffset: 10, as: UInt16.self)
                Self.copy(source.address, into: raw, at: 12)
                Self.copy(destination.address, into: raw, at: 16)
                var checksum = InternetChecksum()
                checksum.add(UnsafeRawBufferPointer(rebasing: raw[0..<20]))
                raw.storeBytes(of: checksum.value, toByteOffset: 10, as: UInt16.self)
            }
            // TCP header.
            let tcp = ipHeaderLength
            raw.storeBytes(of: source.port.bigEndian, toByteOffset: tcp, as: UInt16.self)
            raw.storeBytes(of: destination.port.bigEndian, toByteOffset: tcp + 2, as: UInt16.self)
            raw.storeBytes(of: sequence.bigEndian, toByteOffset: tcp + 4, as: UInt32.self)
            raw.storeBytes(of: flags.contains(.ack) ? acknowledgement.bigEndian : 0, toByteOffset: tcp + 8, as: UInt32.self)
            raw[tcp + 12] = UInt8(tcpHeaderLength / 4) << 4
            raw[tcp + 13] = flags.rawValue
            raw.storeBytes(of: UInt16(0xffff).bigEndian, toByteOffset: tcp + 14, as: UInt16.self)  // window
            raw.storeBytes(of: UInt32(0), toByteOffset: tcp + 16, as: UInt32.self)  // checksum + urgent
            for (offset, byte) in options.enumerated() { raw[tcp + 20 + offset] = byte }
            if payload.count > 0, let base = payload.baseAddress {
                (raw.baseAddress! + tcp + tcpHeaderLength).copyMemory(from: base, byteCount: payload.count)
            }
            // TCP checksum over the pseudo-header and the segment.
            var checksum = InternetChecksum()
            if isIPv6 {
                checksum.add(UnsafeRawBufferPointer(rebasing: raw[8..<40]))
                var tail: (UInt32, UInt32) = (UInt32(tcpLength).bigEndian, UInt32(6).bigEndian)
                withUnsafeBytes(of: &tail) { checksum.add($0) }
            } else {
                checksum.add(UnsafeRawBufferPointer(rebasing: raw[12..<20]))
                var tail: (UInt16, UInt16) = (UInt16(6).bigEndian, UInt16(tcpLength).bigEndian)
                withUnsafeBytes(of: &tail) { checksum.add($0) }
            }
            checksum.add(UnsafeRawBufferPointer(rebasing: raw[tcp..<total]))
            raw.storeBytes(of: checksum.value, toByteOffset: tcp + 16, as: UInt16.self)
            return try body(UnsafeRawBufferPointer(rebasing: raw[0..<total]))
        }
    }

    private static func copy(_ bytes: [UInt8], into raw: UnsafeMutableRawBufferPointer, at offset: Int) {
        for (index, byte) in bytes.enumerated() { raw[offset + index] = byte }
    }
}
