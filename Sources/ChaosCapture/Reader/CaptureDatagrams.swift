import ChaosCore

/// One UDP datagram of a capture.
package struct CapturedDatagram: Sendable, Equatable {
    /// Nanoseconds since the capture's first packet.
    package var time: Int64
    /// `a.b.c.d:port` or `[v6]:port`.
    package var source: String
    package var destination: String
    package var sourcePort: UInt16
    package var destinationPort: UInt16
    /// The payload as captured.
    package var payload: [UInt8]
    /// The capture cut it short (its snapshot length).
    package var truncated: Bool
}

/// The UDP datagrams of a capture, in order: the same files and link types as ``CaptureReader`` reads (pcap or
/// pcapng, Ethernet with `tcpdump -i lo`, Linux cooked, raw IP, BSD loopback), IPv4 and IPv6; fragments are skipped.
package enum CaptureDatagrams {
    /// Calls `body` with each datagram of `path` (a BPF `filter` first, if given) and returns how many there were.
    /// - Throws: `ChaosError.badInput` for an unreadable file, an unsupported link type or a bad filter (naming the
    ///   file and byte offset); any error `body` throws.
    @discardableResult
    package static func read(path: String, filter: String? = nil, _ body: (CapturedDatagram) throws -> Void) throws -> Int {
        let capture = try OfflineCapture(path: path)
        guard let decoder = PacketDecoder(dataLinkType: capture.dataLinkType) else {
            throw ChaosError.badInput("capture \(path): link type \(capture.dataLinkType) is not supported")
        }
        if let filter { try capture.setFilter(filter) }
        var first: Int64?
        var count = 0
        try capture.forEachPacket { packet, wireLength, timestamp in
            let start = first ?? timestamp
            first = start
            guard let datagram = decoder.decodeDatagram(packet, wireLength: wireLength) else { return }
            count += 1
            try body(
                CapturedDatagram(
                    time: timestamp - start,
                    source: datagram.source.text,
                    destination: datagram.destination.text,
                    sourcePort: datagram.source.port,
                    destinationPort: datagram.destination.port,
                    payload: Array(datagram.payload),
                    truncated: datagram.missingPayload > 0
                )
            )
        }
        return count
    }
}
