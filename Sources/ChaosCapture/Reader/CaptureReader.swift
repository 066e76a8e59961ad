package import ChaosCore

/// Reads a capture taken anywhere (tcpdump, Wireshark, a phone's tether, or ``CaptureWriter``) and
/// turns it into the same `TrafficEvent` stream the live proxy produces, so one audit serves both.
///
/// Files are pcap or pcapng, read through libpcap; link types Ethernet (including Linux loopback
/// from `tcpdump -i lo`), Linux cooked (SLL, SLL2), raw IPv4/IPv6 and BSD loopback (NULL/LOOP).
/// TCP is reassembled per direction (out-of-order, retransmitted and overlapping segments); holes
/// that never fill are counted as capture loss and nothing is made up for them.
///
/// Each flow (or each pair of proxy legs, see ``CaptureReadOptions/Pairing``) yields `.opened`,
/// then its payload in order: a standalone flow reports each payload as `.read(producer)` followed
/// by `.written(consumer)`; a paired connection reports the client leg's client→proxy bytes as
/// `.read(.client)`, proxy→client as `.written(.client)`, the server leg's proxy→server bytes as
/// `.written(.server)` and server→proxy as `.read(.server)`. A FIN from a client or server is
/// `.closed(side, .fin)`; an RST on a leg is `.closed(side, .reset)`. Times are nanoseconds since
/// the first packet. Events of a leg waiting to be paired are held up to the pairing window, so
/// events of different connections may be up to that far out of time order.
package enum CaptureReader {
    /// Reads `path`, calling `handler` with each event in order.
    /// - Returns: what the reader counted (packets, flows, capture loss, retransmissions…).
    /// - Throws: `ChaosError.badInput` for an unreadable, truncated or garbage file (the message
    ///   names the file and byte offset), an unsupported link type or a bad filter; any error
    ///   `handler` throws.
    package static func read(
        path: String,
        options: CaptureReadOptions = CaptureReadOptions(),
        _ handler: (TrafficEvent) throws -> Void
    ) throws -> CaptureStatistics {
        try read(paths: [path], options: options, handler)
    }

    /// Reads several files as one capture, in the order given (the files of a capture ring,
    /// oldest first).
    package static func read(
        paths: [String],
        options: CaptureReadOptions = CaptureReadOptions(),
        _ handler: (TrafficEvent) throws -> Void
    ) throws -> CaptureStatistics {
        try readBatches(paths: paths, options: options) { events, _ in
            for event in events { try handler(event) }
        }
    }

    /// ``read(paths:options:_:)``, handing the events over in batches of ``PipelinedEvents/batchEvents`` events or
    /// ``PipelinedEvents/batchBytes`` bytes (fewer at the end), with what they cost a bounded hand-over
    /// (``TrafficEvent/queuedBytes``): each batch the reconstruction's own array, handed over as it is (no event copied
    /// or retained again on the way). An error comes out after the events read before it.
    static func readBatches(
        paths: [String],
        options: CaptureReadOptions,
        _ handler: (_ events: [TrafficEvent], _ bytes: Int) throws -> Void
    ) throws -> CaptureStatistics {
        let reconstructor = TrafficReconstructor(options: options)
        var firstTimestamp: Int64?
        var counted = 0
        var countedBytes = 0
        /// Adds the cost of the events released since the last count.
        func count() {
            reconstructor.outbox.withUnsafeBufferPointer { events in
                for index in counted..<events.count { countedBytes += events[index].queuedBytes }
            }
            counted = reconstructor.outbox.count
        }
        /// Hands the outbox over whole; the next batch starts in an array of its own.
        func drain() throws {
            count()
            guard counted > 0 else { return }
            let batch = reconstructor.outbox
            let bytes = countedBytes
            reconstructor.outbox = []
            reconstructor.outbox.reserveCapacity(PipelinedEvents.batchEvents)
            counted = 0
            countedBytes = 0
            try handler(batch, bytes)
        }
        do {
            for path in paths {
                let capture = try OfflineCapture(path: path)
                guard let decoder = PacketDecoder(dataLinkType: capture.dataLinkType) else {
                    throw ChaosError.badInput(
                        "capture \(path): link type \(capture.dataLinkType) is not supported "
                            + "(expected Ethernet, Linux cooked, raw IP or BSD loopback) at byte offset 0"
                    )
                }
                if let filter = options.filter { try capture.setFilter(filter) }
                try capture.forEachPacket { packet, wireLength, timestamp in
                    reconstructor.statistics.packets += 1
                    reconstructor.statistics.capturedBytes += packet.count
                    let start = firstTimestamp ?? timestamp
                    firstTimestamp = start
                    if let segment = decoder.decode(packet, wireLength: wireLength) {
                        try reconstructor.consume(segment, time: Self.relativeTime(timestamp, since: start))
                    } else if let datagram = decoder.decodeDatagram(packet, wireLength: wireLength) {
                        reconstructor.consume(datagram: datagram, time: Self.relativeTime(timestamp, since: start))
                    } else {
                        reconstructor.statistics.skippedPackets += 1
                        return
                    }
                    guard reconstructor.outbox.count > counted else { return }
                    count()
                    if counted >= PipelinedEvents.batchEvents || countedBytes >= PipelinedEvents.batchBytes { try drain() }
                }
            }
            try reconstructor.finish()
        } catch {
            // The events released before the error first (the handler's own error, if it throws one, wins).
            try drain()
            throw error
        }
        try drain()
        return reconstructor.statistics
    }

    /// Nanoseconds from the first packet to `timestamp`, held to 0...2^62 (146 years): a capture's clock may
    /// jump back or sit near the ends of Int64 (pcapng timestamps are 64-bit), and what the audit adds to a
    /// time must not overflow.
    static func relativeTime(_ timestamp: Int64, since start: Int64) -> Int64 {
        let (difference, overflow) = timestamp.subtractingReportingOverflow(start)
        if overflow { return timestamp < start ? 0 : 1 << 62 }
        return Swift.min(Swift.max(difference, 0), 1 << 62)
    }

    /// Reads `path` into memory: every event and the statistics (for tests and small captures).
    package static func readAll(
        path: String,
        options: CaptureReadOptions = CaptureReadOptions()
    ) throws
        -> (events: [TrafficEvent], statistics: CaptureStatistics)
    {
        var events: [TrafficEvent] = []
        let statistics = try read(path: path, options: options) { events.append($0) }
        return (events, statistics)
    }
}
