import CChaosEpoll
import ChaosCore
import Glibc
import Testing

@testable import ChaosProxy

/// Loss in the kernel, without the kernel: which packets its queue's reader draws for, which flows a lossy direction
/// queues, and the rule that queues them (the queue itself is tried on the kernel by `KernelLossPathTests`).
@Suite("Kernel loss: packets, flows and the queue's rule")
struct KernelLossTests {
    /// An IPv4 TCP packet's first bytes: 20 bytes of IP header, a TCP header of `tcpWords` words, `payload` bytes.
    static func ipv4(from: (UInt8, UInt16), to: (UInt8, UInt16), flags: UInt8, payload: Int, tcpWords: Int = 8) -> chaos_nfq_packet {
        var bytes = [UInt8](repeating: 0, count: 20 + tcpWords * 4)
        let total = 20 + tcpWords * 4 + payload
        bytes[0] = 0x45
        bytes[2] = UInt8(total >> 8)
        bytes[3] = UInt8(total & 0xff)
        bytes[9] = 6
        bytes[12...15] = [127, 0, 0, from.0]
        bytes[16...19] = [127, 0, 0, to.0]
        bytes[20] = UInt8(from.1 >> 8)
        bytes[21] = UInt8(from.1 & 0xff)
        bytes[22] = UInt8(to.1 >> 8)
        bytes[23] = UInt8(to.1 & 0xff)
        bytes[32] = UInt8(tcpWords << 4)
        bytes[33] = flags
        return packet(bytes)
    }

    static func packet(_ bytes: [UInt8]) -> chaos_nfq_packet {
        var packet = chaos_nfq_packet()
        packet.id = 7
        packet.captured = UInt16(bytes.count)
        withUnsafeMutableBytes(of: &packet.header) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return packet
    }

    static let ack: UInt8 = 0x10

    @Test("a segment with bytes or a FIN is drawn for; a pure acknowledgement, a reset and a packet too short to read are not")
    func numberedSegments() throws {
        let flow = try #require(PacketFlow(KernelFlow(sourceIP: "127.0.0.1", sourcePort: 40_000, destinationIP: "127.0.0.2", destinationPort: 5_000)))
        var data = Self.ipv4(from: (1, 40_000), to: (2, 5_000), flags: Self.ack, payload: 1_448)
        let parsed = try #require(KernelLoss.parse(&data))
        #expect(parsed.0 == flow && parsed.1)
        var pureAck = Self.ipv4(from: (1, 40_000), to: (2, 5_000), flags: Self.ack, payload: 0)
        #expect(KernelLoss.parse(&pureAck)?.1 == false)
        var fin = Self.ipv4(from: (1, 40_000), to: (2, 5_000), flags: Self.ack | 0x01, payload: 0)
        #expect(KernelLoss.parse(&fin)?.1 == true)
        var reset = Self.ipv4(from: (1, 40_000), to: (2, 5_000), flags: Self.ack | 0x04, payload: 10)
        #expect(KernelLoss.parse(&reset)?.1 == false)
        var other = Self.ipv4(from: (2, 5_000), to: (1, 40_000), flags: Self.ack, payload: 10)
        #expect(KernelLoss.parse(&other)?.0 == flow.reversedForTest)
        var short = Self.packet([0x45, 0, 0, 60])
        #expect(KernelLoss.parse(&short) == nil)
    }

    @Test("an IPv6 segment's flow is its addresses and ports; its payload length says whether it carries bytes")
    func ipv6Segment() throws {
        var bytes = [UInt8](repeating: 0, count: 40 + 32)
        bytes[0] = 0x60
        bytes[5] = 32 + 100  // payload length: the TCP header and 100 bytes
        bytes[6] = 6
        bytes[23] = 1  // ::1
        bytes[39] = 1
        bytes[40...43] = [0x9c, 0x40, 0x13, 0x88]  // 40000 → 5000
        bytes[52] = 8 << 4
        bytes[53] = Self.ack
        var packet = Self.packet(bytes)
        let parsed = try #require(KernelLoss.parse(&packet))
        #expect(parsed.0 == PacketFlow(KernelFlow(sourceIP: "::1", sourcePort: 40_000, destinationIP: "::1", destinationPort: 5_000)))
        #expect(parsed.1)
    }

    /// One queued packet's netlink message: its header, the queue's generic header, the packet's id and its bytes
    /// (`payload` of them: a length that is not a multiple of 4 leaves the message unpadded at a datagram's end).
    static func queueMessage(id: UInt32, payload: Int) -> [UInt8] {
        // Each piece typed on its own: one expression of them all took the type checker seconds.
        func bytes<Integer: FixedWidthInteger>(_ value: Integer) -> [UInt8] { withUnsafeBytes(of: value, Array.init) }
        func attribute(_ type: UInt16, _ data: [UInt8]) -> [UInt8] {
            let padding: [UInt8] = Array(repeating: 0, count: (4 - data.count % 4) % 4)
            return bytes(UInt16(4 + data.count).littleEndian) + bytes(type.littleEndian) + data + padding
        }
        let packetHeader: [UInt8] = bytes(id.bigEndian) + [0x08, 0x00, 1]  // id, IPv4, hook
        let packet: [UInt8] = Array(repeating: 0x45, count: payload)
        let body: [UInt8] = [2, 0, 0, 0] + attribute(1, packetHeader) + attribute(10, packet)
        let unpadded = body.count - (4 - payload % 4) % 4
        let zeros: [UInt8] = Array(repeating: 0, count: 10)
        let header: [UInt8] = bytes(UInt32(16 + unpadded).littleEndian) + bytes(UInt16(3 << 8).littleEndian) + zeros
        return header + body.prefix(unpadded)
    }

    @Test(
        "a datagram of queued packets is read to its last message, unpadded (a 53-byte packet), and no further; a read leaves no packet without a slot"
    )
    func queueDatagrams() throws {
        var pair: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &pair) == 0)
        defer { for fd in pair { close(fd) } }
        // Two messages in one datagram, the first padded (its payload 60 bytes), the last not (53).
        let first = Self.queueMessage(id: 7, payload: 60)
        let last = Self.queueMessage(id: 8, payload: 53)
        let datagram = first + [UInt8](repeating: 0, count: (4 - first.count % 4) % 4) + last
        #expect(datagram.count % 4 != 0, "the datagram ends unpadded")
        for _ in 0..<3 { #expect(send(pair[1], datagram, datagram.count, 0) == datagram.count) }
        var packets = [chaos_nfq_packet](repeating: chaos_nfq_packet(), count: Int(CHAOS_NFQ_PER_DATAGRAM) + 1)
        // Room for one datagram's packets only: one datagram is read.
        let count = chaos_nfq_receive(pair[0], &packets, Int32(packets.count))
        #expect(count == 2)
        #expect(packets[0].id == 7 && packets[0].captured == 60)
        #expect(packets[1].id == 8 && packets[1].captured == 53)
        // Room for all: the other two datagrams.
        var more = [chaos_nfq_packet](repeating: chaos_nfq_packet(), count: Int(CHAOS_NFQ_PER_DATAGRAM) * 3)
        #expect(chaos_nfq_receive(pair[0], &more, Int32(more.count)) == 4)
        #expect(more.prefix(4).map(\.id) == [7, 8, 7, 8])
    }

    @Test("a lossy direction queues its flow on the client's leg, unless a dead path drops it; the server's leg is never queued")
    func queuedFlows() {
        let client = KernelFlow(sourceIP: "127.0.0.1", sourcePort: 40_001, destinationIP: "127.0.0.1", destinationPort: 5000)
        let server = KernelFlow(sourceIP: "127.0.0.1", sourcePort: 40_002, destinationIP: "127.0.0.1", destinationPort: 6000)
        func drop(_ drops: [(flow: KernelFlow, drop: KernelDrop?)], _ flow: KernelFlow) -> KernelDrop? {
            drops.first { $0.flow == flow }?.drop
        }
        let both = KernelDrop.drops(dead: [], lossy: [.upstream, .downstream], client: client, server: server)
        #expect(drop(both, client) == .queued && drop(both, client.reversed) == .queued)
        #expect(drop(both, server) == nil && drop(both, server.reversed) == nil)
        let up = KernelDrop.drops(dead: [], lossy: [.upstream], client: client, server: server)
        #expect(drop(up, client) == .queued && drop(up, client.reversed) == nil)
        // Dead both ways: what the proxy sends the client is dropped whole; what the client sends still meets its loss.
        let dead = KernelDrop.drops(dead: [.upstream, .downstream], lossy: [.upstream, .downstream], client: client, server: server)
        #expect(drop(dead, client.reversed) == .everything && drop(dead, client) == .queued)
        #expect(KernelDrop.drops(dead: [], client: client, server: server).allSatisfy { $0.drop == nil })
    }

    @Test("a flow going to the queue gets its rule, one leaving it loses it (deletions first), per family; other changes touch no rule")
    func queueRules() {
        let four = KernelFlow(sourceIP: "127.0.0.1", sourcePort: 40_001, destinationIP: "127.0.0.1", destinationPort: 5000)
        let six = KernelFlow(sourceIP: "::1", sourcePort: 40_002, destinationIP: "::1", destinationPort: 6000)
        let scripts = LossQueueScript.change(
            [(four, nil, .queued), (four.reversed, .queued, .everything), (six, .queued, nil), (six.reversed, nil, .data)],
            queue: 16_500,
            comment: "chaos_42"
        )
        #expect(
            scripts.ipv4 == """
                *raw
                -D PREROUTING -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --sport 5000 --dport 40001 -m comment --comment chaos_42 -j NFQUEUE --queue-num 16500 --queue-bypass
                -A PREROUTING -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --sport 40001 --dport 5000 -m comment --comment chaos_42 -j NFQUEUE --queue-num 16500 --queue-bypass
                COMMIT

                """
        )
        #expect(scripts.ipv6?.contains("-D PREROUTING -s ::1/128 -d ::1/128 -p tcp -m tcp --sport 40002 --dport 6000 ") == true)
        #expect(LossQueueScript.change([(four, .everything, .data)], queue: 1, comment: "chaos_42") == (nil, nil))
        // The nft scripts never name the queue: its flows are in no set.
        #expect(NftScript.change(table: "chaos_42", [(four, nil, .queued)]).isEmpty)
    }

    @Test("the rules of chaos processes that are gone are removed as iptables-save printed them; others' stay")
    func staleRules() {
        let saved = """
            *raw
            :PREROUTING ACCEPT [0:0]
            -A PREROUTING -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --sport 1 --dport 2 -m comment --comment chaos_100 -j NFQUEUE --queue-num 5 --queue-bypass
            -A PREROUTING -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --sport 3 --dport 4 -m comment --comment chaos_200 -j NFQUEUE --queue-num 6 --queue-bypass
            -A PREROUTING -p tcp -m comment --comment other -j ACCEPT
            COMMIT
            """
        #expect(
            LossQueueScript.removal(in: saved) { $0 == 100 } == """
                *raw
                -D PREROUTING -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --sport 1 --dport 2 -m comment --comment chaos_100 -j NFQUEUE --queue-num 5 --queue-bypass
                COMMIT

                """
        )
        #expect(LossQueueScript.removal(in: saved) { $0 == 300 } == nil)
    }
}

extension PacketFlow {
    /// The flow the other way.
    var reversedForTest: PacketFlow {
        PacketFlow(source: destination, destination: source, ports: ports << 16 | ports >> 16)
    }
}
