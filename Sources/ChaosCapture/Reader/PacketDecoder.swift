/// One TCP segment decoded from a captured packet. `payload` points into libpcap's buffer and is
/// valid only until the next packet is read.
struct DecodedSegment {
    var source: WireEndpoint
    var destination: WireEndpoint
    var sequence: UInt32
    var acknowledgement: UInt32
    var flags: TCPFlags
    /// The captured payload bytes.
    var payload: UnsafeRawBufferPointer
    /// Payload bytes the packet carried on the wire but the capture cut off (snapshot length).
    var missingPayload: Int
}

/// One UDP datagram decoded from a captured packet; `payload` as a segment's.
struct DecodedDatagram {
    var source: WireEndpoint
    var destination: WireEndpoint
    var payload: UnsafeRawBufferPointer
    /// Payload bytes the capture cut off (snapshot length).
    var missingPayload: Int
}

/// Decodes link, IP and TCP (or UDP) headers. Every length is checked against the captured bytes: a broken
/// packet is skipped, never read past.
struct PacketDecoder {
    /// The link layers chaos understands.
    enum LinkLayer {
        case ethernet, linuxCooked, linuxCooked2, rawIP, bsdLoopback
    }

    let link: LinkLayer

    /// The decoder for a libpcap `DLT_` value, or nil when it is not supported.
    init?(dataLinkType: Int32) {
        switch dataLinkType {
        case 1: link = .ethernet  // DLT_EN10MB (also Linux `-i lo`, with zero MAC addresses)
        case 113: link = .linuxCooked  // DLT_LINUX_SLL (`-i any`)
        case 276: link = .linuxCooked2  // DLT_LINUX_SLL2
        case 12, 14, 101, 228, 229: link = .rawIP  // DLT_RAW (12 or 14 by platform), LINKTYPE_RAW, IPV4, IPV6
        case 0, 108: link = .bsdLoopback  // DLT_NULL, DLT_LOOP
        default: return nil
        }
    }

    /// Decodes one TCP packet of `capturedLength` bytes whose original length was `wireLength`.
    func decode(_ packet: UnsafeRawBufferPointer, wireLength: Int) -> DecodedSegment? {
        guard let ip = internetPayload(packet, wireLength: wireLength, protocol: 6) else { return nil }
        return decodeTCP(packet, at: ip.start, wireLength: ip.length, source: ip.source, destination: ip.destination)
    }

    /// Decodes one UDP packet, as ``decode(_:wireLength:)`` a TCP one.
    func decodeDatagram(_ packet: UnsafeRawBufferPointer, wireLength: Int) -> DecodedDatagram? {
        guard let ip = internetPayload(packet, wireLength: wireLength, protocol: 17) else { return nil }
        let start = ip.start
        guard ip.length >= 8, packet.count >= start + 8 else { return nil }
        let length = Int(packet.u16(at: start + 4))
        guard length >= 8, length <= ip.length else { return nil }
        var from = ip.source
        var to = ip.destination
        from.port = packet.u16(at: start)
        to.port = packet.u16(at: start + 2)
        let captured = min(length - 8, packet.count - start - 8)
        return DecodedDatagram(
            source: from,
            destination: to,
            payload: UnsafeRawBufferPointer(rebasing: packet[(start + 8)..<(start + 8 + captured)]),
            missingPayload: length - 8 - captured
        )
    }

    /// Where the transport header of protocol `number` starts in `packet`, and how long its segment was on the wire.
    private func internetPayload(
        _ packet: UnsafeRawBufferPointer,
        wireLength: Int,
        protocol number: UInt8
    ) -> (source: WireEndpoint, destination: WireEndpoint, start: Int, length: Int)? {
        var offset: Int
        var etherType: UInt16?
        switch link {
        case .ethernet:
            guard packet.count >= 14 else { return nil }
            offset = 12
            var type = packet.u16(at: offset)
            offset += 2
            while type == 0x8100 || type == 0x88a8 || type == 0x9100 {
                guard packet.count >= offset + 4 else { return nil }
                type = packet.u16(at: offset + 2)
                offset += 4
            }
            etherType = type
        case .linuxCooked:
            guard packet.count >= 16 else { return nil }
            etherType = packet.u16(at: 14)
            offset = 16
        case .linuxCooked2:
            guard packet.count >= 20 else { return nil }
            etherType = packet.u16(at: 0)
            offset = 20
        case .rawIP:
            offset = 0
        case .bsdLoopback:
            offset = 4
        }
        guard packet.count > offset else { return nil }
        let version = packet[offset] >> 4
        if let etherType {
            guard (etherType == 0x0800 && version == 4) || (etherType == 0x86dd && version == 6) else { return nil }
        }
        let missingFromLink = max(0, wireLength - packet.count)
        switch version {
        case 4: return ipv4(packet, at: offset, missing: missingFromLink, protocol: number)
        case 6: return ipv6(packet, at: offset, protocol: number)
        default: return nil
        }
    }

    private func ipv4(
        _ packet: UnsafeRawBufferPointer,
        at start: Int,
        missing: Int,
        protocol number: UInt8
    ) -> (source: WireEndpoint, destination: WireEndpoint, start: Int, length: Int)? {
        guard packet.count >= start + 20 else { return nil }
        let headerLength = Int(packet[start] & 0x0f) * 4
        var totalLength = Int(packet.u16(at: start + 2))
        let fragment = packet.u16(at: start + 6)
        guard headerLength >= 20, packet[start + 9] == number, fragment & 0x3fff == 0 else { return nil }
        if totalLength == 0 { totalLength = packet.count - start + missing }  // TCP segmentation offload
        guard totalLength >= headerLength, packet.count >= start + headerLength else { return nil }
        let source = WireEndpoint(high: 0, low: UInt64(packet.u32(at: start + 12)), isIPv6: false, port: 0)
        let destination = WireEndpoint(high: 0, low: UInt64(packet.u32(at: start + 16)), isIPv6: false, port: 0)
        return (source, destination, start + headerLength, totalLength - headerLength)
    }

    private func ipv6(
        _ packet: UnsafeRawBufferPointer,
        at start: Int,
        protocol number: UInt8
    ) -> (source: WireEndpoint, destination: WireEndpoint, start: Int, length: Int)? {
        guard packet.count >= start + 40 else { return nil }
        let payloadLength = Int(packet.u16(at: start + 4))
        guard payloadLength > 0 else { return nil }  // jumbograms are not supported
        var next = packet[start + 6]
        var offset = start + 40
        var remaining = payloadLength
        while next != number {
            guard packet.count >= offset + 8 else { return nil }
            let extensionLength: Int
            switch next {
            case 0, 43, 60: extensionLength = (Int(packet[offset + 1]) + 1) * 8
            case 51: extensionLength = (Int(packet[offset + 1]) + 2) * 4
            default: return nil  // fragments (44), ESP and anything else
            }
            guard remaining >= extensionLength else { return nil }
            next = packet[offset]
            offset += extensionLength
            remaining -= extensionLength
        }
        let source = WireEndpoint(high: packet.u64(at: start + 8), low: packet.u64(at: start + 16), isIPv6: true, port: 0)
        let destination = WireEndpoint(
            high: packet.u64(at: start + 24),
            low: packet.u64(at: start + 32),
            isIPv6: true,
            port: 0
        )
        return (source, destination, offset, remaining)
    }

    private func decodeTCP(
        _ packet: UnsafeRawBufferPointer,
        at start: Int,
        wireLength: Int,
        source: WireEndpoint,
        destination: WireEndpoint
    ) -> DecodedSegment? {
        guard wireLength >= 20, packet.count >= start + 20 else { return nil }
        let headerLength = Int(packet[start + 12] >> 4) * 4
        guard headerLength >= 20, wireLength >= headerLength, packet.count >= start + headerLength else { return nil }
        var from = source
        var to = destination
        from.port = packet.u16(at: start)
        to.port = packet.u16(at: start + 2)
        let payloadStart = start + headerLength
        let wirePayload = wireLength - headerLength
        let captured = min(wirePayload, packet.count - payloadStart)
        return DecodedSegment(
            source: from,
            destination: to,
            sequence: packet.u32(at: start + 4),
            acknowledgement: packet.u32(at: start + 8),
            flags: TCPFlags(rawValue: packet[start + 13] & 0x1f),
            payload: UnsafeRawBufferPointer(rebasing: packet[payloadStart..<(payloadStart + captured)]),
            missingPayload: wirePayload - captured
        )
    }
}

extension UnsafeRawBufferPointer {
    /// A big-endian 16-bit field.
    @inline(__always) func u16(at offset: Int) -> UInt16 {
        UInt16(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    /// A big-endian 32-bit field.
    @inline(__always) func u32(at offset: Int) -> UInt32 {
        UInt32(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    /// A big-endian 64-bit field.
    @inline(__always) func u64(at offset: Int) -> UInt64 {
        UInt64(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}
