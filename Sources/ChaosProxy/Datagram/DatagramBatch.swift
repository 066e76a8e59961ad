import Foundation
import NIOCore

/// The datagrams a relay writes in one turn of its event loop (every socket's read burst, every timer that came due)
/// go out together, after the turn: each socket's datagrams are handed to the kernel in one `sendmmsg`, and where the
/// kernel segments UDP itself (Linux's UDP GSO), a run of equal-sized datagrams to the same address goes as one
/// message that the kernel cuts into them again, so the receiver reads the same datagrams. A socket's writes keep
/// their order; none waits past the turn that wrote it (the flush is the loop's next task), and what a write does not
/// send (the socket closed meanwhile, or the kernel refused it) is told to `writeFailed`, a drop to count. What a turn holds is bounded by what the turn read (``readsPerWakeUp`` per socket, times
/// ``vectorRead`` on the listening socket) and what its timers released (within the held bytes' bound).
struct DatagramBatch {
    /// The most datagrams a socket reads per wake-up (NIO's `maxMessagesPerRead`, 4 by default): a burst's worth to
    /// write together.
    static let readsPerWakeUp: UInt = 16
    /// The most datagrams the listening socket takes in one `recvmmsg`.
    static let vectorRead = 16
    /// The most datagrams one segmented message carries (Linux's `UDP_MAX_SEGMENTS` is 64 on older kernels).
    static let segmentsPerMessage = 64
    /// The most bytes one segmented message carries (a UDP payload's limit, less room for the headers).
    static let bytesPerMessage = 65_000

    /// Whether runs of datagrams go as segmented messages.
    let segments: Bool
    /// The sockets written to and not flushed yet, in the order first written, each with its messages.
    private var unflushed: [(channel: any Channel, messages: [Message])] = []

    /// Datagrams to one address, each of `segmentSize` bytes but the last, in one buffer of their own (the bytes are
    /// copied out of the read's buffer, which the socket's next read can then use again).
    struct Message {
        let address: SocketAddress
        var bytes: ByteBuffer
        let segmentSize: Int
        var count = 1
        /// A shorter datagram came last: the run is over.
        var ended = false

        init(_ envelope: AddressedEnvelope<ByteBuffer>, segmented: Bool) {
            address = envelope.remoteAddress
            segmentSize = envelope.data.readableBytes
            // Room for the run it may start, at once (growing it datagram by datagram copies it again and again).
            let room = segmented ? min(DatagramBatch.bytesPerMessage, segmentSize * DatagramBatch.segmentsPerMessage) : segmentSize
            bytes = ByteBufferAllocator().buffer(capacity: max(segmentSize, room))
            bytes.writeImmutableBuffer(envelope.data)
        }

        /// Adds `datagram` to the run when it may ride in it; returns whether it did.
        mutating func append(_ datagram: AddressedEnvelope<ByteBuffer>) -> Bool {
            let size = datagram.data.readableBytes
            guard !ended, datagram.remoteAddress == address, size > 0, size <= segmentSize, count < DatagramBatch.segmentsPerMessage,
                bytes.readableBytes + size <= DatagramBatch.bytesPerMessage
            else { return false }
            bytes.writeImmutableBuffer(datagram.data)
            count += 1
            ended = size < segmentSize
            return true
        }

        /// The message as NIO writes it: segmented by the kernel when it carries more than one datagram.
        var envelope: AddressedEnvelope<ByteBuffer> {
            guard count > 1 else { return AddressedEnvelope(remoteAddress: address, data: bytes) }
            let metadata = AddressedEnvelope<ByteBuffer>.Metadata(ecnState: .transportNotCapable, packetInfo: nil, segmentSize: segmentSize)
            return AddressedEnvelope(remoteAddress: address, data: bytes, metadata: metadata)
        }
    }

    /// Told how many datagrams a write that failed carried (its whole message: none of them went).
    private let writeFailed: @Sendable (Int) -> Void

    init(segments: Bool, writeFailed: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.segments = segments
        self.writeFailed = writeFailed
    }

    /// Whether a relay's runs go segmented: where the kernel can, and only where nothing records the datagrams (an
    /// audit, a capture) and `CHAOS_UDP_GSO` is not `0`. A segmented message is one packet until the receiving socket
    /// (or a NIC) cuts it, so a `tcpdump` on the proxy's host sees one large datagram where the receiver reads many; a
    /// run that is audited or captured keeps every datagram a packet of its own on the wire.
    static func segmentsWanted(recording: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        System.supportsUDPSegmentationOffload && !recording && environment["CHAOS_UDP_GSO"] != "0"
    }

    /// Keeps `envelope` for `channel` until ``flushAll()``; returns true for the turn's first datagram (the caller
    /// then has the loop run ``flushAll()`` once the turn's events are handled).
    mutating func write(_ envelope: AddressedEnvelope<ByteBuffer>, to channel: any Channel) -> Bool {
        guard let index = unflushed.firstIndex(where: { $0.channel === channel }) else {
            unflushed.append((channel, [Message(envelope, segmented: segments)]))
            return unflushed.count == 1
        }
        let last = unflushed[index].messages.count - 1
        if !segments || envelope.data.readableBytes == 0 || !unflushed[index].messages[last].append(envelope) {
            unflushed[index].messages.append(Message(envelope, segmented: segments))
        }
        return false
    }

    /// Writes and flushes every socket's datagrams since the last flush.
    mutating func flushAll() {
        let pending = unflushed
        unflushed.removeAll(keepingCapacity: true)
        for (channel, messages) in pending {
            for message in messages {
                let count = message.count
                channel.write(message.envelope).whenFailure { [writeFailed] _ in writeFailed(count) }
            }
            channel.flush()
        }
    }
}
