import Foundation

/// A hand-written capture of TCP flows on loopback (to 127.0.0.1): each call adds one packet, in capture order,
/// with the right sequence and acknowledgement numbers; ``write(to:)`` saves a raw-IP classic pcap.
final class ScriptedTCP {
    /// One flow's state: its ports and the next sequence number each way.
    struct Flow {
        let clientPort: UInt16
        let serverPort: UInt16
        /// The client's IPv4 address (the server's is 127.0.0.1).
        var clientHost: [UInt8] = [127, 0, 0, 1]
        var clientNext: UInt32
        var serverNext: UInt32
    }

    private var packets: [[UInt8]] = []
    /// Each packet's time, in microseconds after the first.
    private var times: [UInt64] = []
    /// The time of the next packet, in microseconds.
    private var clock: UInt64 = 0

    /// A flow whose three-way handshake is added now.
    func open(_ clientPort: UInt16, to serverPort: UInt16, from clientHost: [UInt8] = [127, 0, 0, 1]) -> Flow {
        var flow = Flow(
            clientPort: clientPort,
            serverPort: serverPort,
            clientHost: clientHost,
            clientNext: UInt32(clientPort) << 12,
            serverNext: UInt32(serverPort) << 16
        )
        add(flow, fromClient: true, flags: 0x02, sequence: flow.clientNext, acknowledgement: 0)
        flow.clientNext &+= 1
        add(flow, fromClient: false, flags: 0x12, sequence: flow.serverNext, acknowledgement: flow.clientNext)
        flow.serverNext &+= 1
        add(flow, fromClient: true, flags: 0x10, sequence: flow.clientNext, acknowledgement: flow.serverNext)
        return flow
    }

    /// One segment carrying `payload`, and the receiver's ACK of it.
    func send(_ payload: some Collection<UInt8>, on flow: inout Flow, fromClient: Bool) {
        let bytes = Array(payload)
        if fromClient {
            add(flow, fromClient: true, flags: 0x18, sequence: flow.clientNext, acknowledgement: flow.serverNext, payload: bytes)
            flow.clientNext &+= UInt32(bytes.count)
            add(flow, fromClient: false, flags: 0x10, sequence: flow.serverNext, acknowledgement: flow.clientNext)
        } else {
            add(flow, fromClient: false, flags: 0x18, sequence: flow.serverNext, acknowledgement: flow.clientNext, payload: bytes)
            flow.serverNext &+= UInt32(bytes.count)
            add(flow, fromClient: true, flags: 0x10, sequence: flow.clientNext, acknowledgement: flow.serverNext)
        }
    }

    /// A segment from the client carrying `payload` that the server never acknowledges: it resets the connection
    /// instead (RST+ACK, its acknowledgement number past the payload, as Linux's reset of a socket closed unread).
    func sendThenServerResets(_ payload: some Collection<UInt8>, on flow: inout Flow) {
        let bytes = Array(payload)
        add(flow, fromClient: true, flags: 0x18, sequence: flow.clientNext, acknowledgement: flow.serverNext, payload: bytes)
        flow.clientNext &+= UInt32(bytes.count)
        add(flow, fromClient: false, flags: 0x14, sequence: flow.serverNext, acknowledgement: flow.clientNext)
    }

    /// A segment from the client carrying `payload`, sent `times` times (the first flight, then retransmissions 200 ms
    /// apart, as into a dead path) and never acknowledged.
    func sendUnacknowledged(_ payload: some Collection<UInt8>, on flow: inout Flow, times: Int) {
        let bytes = Array(payload)
        for attempt in 0..<times {
            if attempt > 0 { wait(milliseconds: 200) }
            add(flow, fromClient: true, flags: 0x18, sequence: flow.clientNext, acknowledgement: flow.serverNext, payload: bytes)
        }
        flow.clientNext &+= UInt32(bytes.count)
    }

    /// A reset: the client's (RST), or the server's (RST+ACK, as Linux answers a segment reaching a socket it closed).
    func reset(_ flow: inout Flow, fromClient: Bool) {
        if fromClient {
            add(flow, fromClient: true, flags: 0x04, sequence: flow.clientNext, acknowledgement: 0)
        } else {
            add(flow, fromClient: false, flags: 0x14, sequence: flow.serverNext, acknowledgement: flow.clientNext)
        }
    }

    /// The server's FIN alone (a half-close, or a socket it closed), and the client's ACK of it.
    func serverFIN(_ flow: inout Flow) {
        add(flow, fromClient: false, flags: 0x11, sequence: flow.serverNext, acknowledgement: flow.clientNext)
        flow.serverNext &+= 1
        add(flow, fromClient: true, flags: 0x10, sequence: flow.clientNext, acknowledgement: flow.serverNext)
    }

    /// Both FINs (the client's first) and the last ACK.
    func close(_ flow: inout Flow) {
        add(flow, fromClient: true, flags: 0x11, sequence: flow.clientNext, acknowledgement: flow.serverNext)
        flow.clientNext &+= 1
        add(flow, fromClient: false, flags: 0x11, sequence: flow.serverNext, acknowledgement: flow.clientNext)
        flow.serverNext &+= 1
        add(flow, fromClient: true, flags: 0x10, sequence: flow.clientNext, acknowledgement: flow.serverNext)
    }

    /// Lets `milliseconds` pass before the next packet (packets are otherwise one millisecond apart).
    func wait(milliseconds: UInt64) {
        clock += milliseconds * 1_000
    }

    /// Writes the packets, one millisecond apart (plus every ``wait(milliseconds:)``), as a classic pcap of raw
    /// IPv4 (LINKTYPE_RAW).
    func write(to path: String) throws {
        var out: [UInt8] = []
        func u32(_ value: UInt32) { out += withUnsafeBytes(of: value.littleEndian, Array.init) }
        func u16(_ value: UInt16) { out += withUnsafeBytes(of: value.littleEndian, Array.init) }
        u32(0xA1B2_C3D4)
        u16(2)
        u16(4)
        u32(0)
        u32(0)
        u32(65535)
        u32(101)
        for (packet, time) in zip(packets, times) {
            u32(1_700_000_000 + UInt32(time / 1_000_000))
            u32(UInt32(time % 1_000_000))
            u32(UInt32(packet.count))
            u32(UInt32(packet.count))
            out += packet
        }
        try Data(out).write(to: URL(fileURLWithPath: path))
    }

    private func add(
        _ flow: Flow,
        fromClient: Bool,
        flags: UInt8,
        sequence: UInt32,
        acknowledgement: UInt32,
        payload: [UInt8] = []
    ) {
        let (source, destination) = fromClient ? (flow.clientPort, flow.serverPort) : (flow.serverPort, flow.clientPort)
        let total = 40 + payload.count
        let server: [UInt8] = [127, 0, 0, 1]
        let addresses: [UInt8] = fromClient ? flow.clientHost + server : server + flow.clientHost
        let header: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0, 0, 0x40, 0, 64, 6, 0, 0]
        let ip: [UInt8] = header + addresses
        let tcp: [UInt8] =
            [UInt8(source >> 8), UInt8(source & 0xFF), UInt8(destination >> 8), UInt8(destination & 0xFF)]
            + withUnsafeBytes(of: sequence.bigEndian, Array.init) + withUnsafeBytes(of: acknowledgement.bigEndian, Array.init)
            + [0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]
        packets.append(ip + tcp + payload)
        times.append(clock)
        clock += 1_000
    }
}
