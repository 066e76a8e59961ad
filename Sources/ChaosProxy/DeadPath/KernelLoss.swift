import CChaosEpoll
import ChaosCore
import Foundation
import Glibc
import Synchronization

/// Packet loss as the kernel sees it: the segments of a lossy flow wait in the kernel's packet queue (nftables'
/// `queue num`, read over netlink) and this process gives each its verdict from the flow's seeded Gilbert-Elliott chain
/// (``LossModel``). A dropped segment is really gone: the sender's TCP retransmits it after a real retransmission
/// timeout, its congestion window shrinks, and everything behind it waits in the receiver's kernel.
///
/// What is drawn: each segment that carries bytes or a FIN, one step of the flow's chain each, retransmissions included.
/// A pure acknowledgement and a reset always pass (cumulative acknowledgements make a lost one all but invisible, and
/// keeping them out keeps the draws to the segments the sender numbered, so the same seed draws the same chain).
/// A packet of a flow no longer lossy passes, as does one the queue has no room for (it fails open: never a loss that
/// was not drawn).
package final class KernelLoss: Sendable {
    /// The queue's number (nftables' `queue num`).
    package let queue: UInt16
    private let socket: Int32
    private let flows = Mutex<[PacketFlow: Drawing]>([:])
    private let totals = Mutex(Counts())

    /// What a lossy flow's chain drew so far.
    package struct Counts: Sendable, Equatable {
        /// Segments drawn for (bytes or a FIN).
        package var segments: Int64 = 0
        /// Of those, the ones dropped.
        package var dropped: Int64 = 0
    }

    /// A flow's model and where its chain is.
    private struct Drawing {
        var model: LossModel
        var state = LossState()
        var generator: SeededGenerator
        var counts = Counts()
    }

    /// How many packets may wait for a verdict; past them, packets pass.
    static let maxQueued: UInt32 = 8_192

    private init(queue: UInt16, socket: Int32) {
        self.queue = queue
        self.socket = socket
    }

    /// A reader of a queue of this process's own (the first free number from one its id picks), with its thread
    /// started; or why there is none.
    static func open(pid: Int32 = getpid()) -> Result<KernelLoss, LossUnavailable> {
        let base = 0x4000 + UInt16(UInt32(bitPattern: pid) % 0x3000)
        var lastError: Int32 = 0
        for offset in 0..<64 as Range<UInt16> {
            let queue = base &+ offset
            let socket = chaos_nfq_open(queue, maxQueued)
            if socket >= 0 {
                let loss = KernelLoss(queue: queue, socket: socket)
                let thread = Thread { loss.readVerdicts() }
                thread.name = "chaos-loss"
                thread.start()
                return .success(loss)
            }
            lastError = -socket
            guard lastError == EBUSY || lastError == EEXIST else { break }
        }
        return .failure(LossUnavailable(reason: "the kernel's packet queue refused chaos (\(String(cString: strerror(lastError))))"))
    }

    /// Why loss stays emulated in the proxy.
    struct LossUnavailable: Error {
        var reason: String
    }

    /// Draws the segments of `flow` from `model` with a chain seeded by `seed` (kept, with its counts, while the model
    /// changes), or (nil) no more.
    package func set(_ flow: KernelFlow, model: LossModel?, seed: UInt64) {
        guard let key = PacketFlow(flow) else { return }
        flows.withLock { flows in
            guard let model else {
                flows.removeValue(forKey: key)
                return
            }
            if flows[key] != nil {
                flows[key]!.model = model
            } else {
                flows[key] = Drawing(model: model, generator: SeededGenerator(seed: seed))
            }
        }
    }

    /// What was drawn for `flow` while it is lossy (nil: it is not).
    package func counts(_ flow: KernelFlow) -> Counts? {
        guard let key = PacketFlow(flow) else { return nil }
        return flows.withLock { $0[key]?.counts }
    }

    /// Every segment drawn for since the process began.
    package var total: Counts { totals.withLock { $0 } }

    /// The reader's loop: a batch of packets, their verdicts, again.
    private func readVerdicts() {
        chaos_name_thread("chaos-loss")
        let batch = Int(CHAOS_NFQ_PER_DATAGRAM) * 2
        var packets = [chaos_nfq_packet](repeating: chaos_nfq_packet(), count: batch)
        var ids = [UInt32](repeating: 0, count: batch)
        var accept = [UInt8](repeating: 1, count: batch)
        while true {
            let count = Int(chaos_nfq_receive(socket, &packets, Int32(batch)))
            if count < 0 {
                if -count == EINTR || -count == ENOBUFS { continue }
                FileHandle.standardError.write(Data("chaos: the kernel loss queue failed: \(String(cString: strerror(-Int32(count))))\n".utf8))
                return
            }
            var drawn = Counts()
            flows.withLock { flows in
                for index in 0..<count {
                    ids[index] = packets[index].id
                    accept[index] = 1
                    guard let (key, numbered) = Self.parse(&packets[index]), numbered, var drawing = flows[key] else { continue }
                    let lost = drawing.state.nextLost(drawing.model, &drawing.generator)
                    drawing.counts.segments += 1
                    drawn.segments += 1
                    if lost {
                        drawing.counts.dropped += 1
                        drawn.dropped += 1
                        accept[index] = 0
                    }
                    flows[key] = drawing
                }
            }
            if drawn.segments > 0 {
                totals.withLock {
                    $0.segments += drawn.segments
                    $0.dropped += drawn.dropped
                }
            }
            _ = chaos_nfq_verdicts(socket, queue, ids, accept, Int32(count))
        }
    }

    /// A queued packet's flow, and whether it is numbered (carries bytes or a FIN, and no reset); nil: not IPv4 or
    /// IPv6 TCP, or too short to tell.
    static func parse(_ packet: inout chaos_nfq_packet) -> (PacketFlow, Bool)? {
        let captured = Int(packet.captured)
        return withUnsafeBytes(of: &packet.header) { raw -> (PacketFlow, Bool)? in
            let bytes = raw.prefix(captured)
            guard bytes.count >= 40 else { return nil }
            func u16(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
            let ipLength: Int
            let total: Int
            let source: IPBytes
            let destination: IPBytes
            switch bytes[0] >> 4 {
            case 4:
                ipLength = Int(bytes[0] & 0x0f) * 4
                guard bytes[9] == 6, ipLength >= 20 else { return nil }
                total = u16(2)
                source = IPBytes(v4: raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                destination = IPBytes(v4: raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
            case 6:
                ipLength = 40
                guard bytes[6] == 6 else { return nil }
                total = 40 + u16(4)
                source = IPBytes(raw: raw, at: 8)
                destination = IPBytes(raw: raw, at: 24)
            default: return nil
            }
            guard bytes.count >= ipLength + 14 else { return nil }
            let ports = UInt32(u16(ipLength)) << 16 | UInt32(u16(ipLength + 2))
            let tcpLength = Int(bytes[ipLength + 12] >> 4) * 4
            let flags = bytes[ipLength + 13]
            let (fin, rst): (UInt8, UInt8) = (0x01, 0x04)
            let carries = total - ipLength - tcpLength > 0 || flags & fin != 0
            return (PacketFlow(source: source, destination: destination, ports: ports), carries && flags & rst == 0)
        }
    }
}

/// An IP address as 16 bytes (an IPv4 address as IPv4-mapped IPv6), for matching a packet's flow.
struct IPBytes: Hashable {
    var high: UInt64
    var low: UInt64

    /// `v4` as it lies in a packet (network order).
    init(v4: UInt32) {
        high = 0
        low = 0xffff_0000_0000 | UInt64(UInt32(bigEndian: v4))
    }

    /// The 16 bytes at `at` in `raw`.
    init(raw: UnsafeRawBufferPointer, at: Int) {
        high = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        low = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))
    }

    /// A dotted IPv4 or an IPv6 address; nil: neither.
    init?(_ text: String) {
        var bytes = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, text, &bytes) == 1 {
            self.init(v4: bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
            return
        }
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return nil }
        self = bytes.withUnsafeBytes { IPBytes(raw: $0, at: 0) }
    }
}

/// A packet's flow as its headers carry it: addresses and ports.
struct PacketFlow: Hashable {
    var source: IPBytes
    var destination: IPBytes
    /// The source port in the high half, the destination port in the low.
    var ports: UInt32
}

extension PacketFlow {
    /// The packets of `flow`; nil when its addresses are not IP addresses.
    init?(_ flow: KernelFlow) {
        guard let source = IPBytes(flow.sourceIP), let destination = IPBytes(flow.destinationIP) else { return nil }
        self.init(source: source, destination: destination, ports: UInt32(flow.sourcePort) << 16 | UInt32(flow.destinationPort))
    }
}
