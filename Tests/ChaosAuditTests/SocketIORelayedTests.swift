import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// Socket.IO audited in lockstep (on an upgraded connection, a read the relay writes whole from its own buffer is
/// decoded once, its protocol events taken as read and as written) gives exactly what the same traffic gives when every
/// write is a copy of its own: random Engine.IO traffic over WebSocket of two clients, with and without
/// permessage-deflate (the inflater's window is handed over with the rest), the upgrade's probe, CONNECT, events split
/// into fragments with pings between them, binary events and their attachments, Engine.IO pings and pongs, gaps, cut
/// into random reads, each read written whole (shared buffer), in pieces, or not yet, with acknowledgements, a reset
/// mid-stream and a message half read at the end, compared whole, for the first argument read in place and for the
/// array indexed.
@Suite("Socket.IO relayed: a read written whole from its own buffer audits as when written as a copy")
struct SocketIORelayedTests {
    typealias W = WebSocketWire

    /// The specs compared: paths into the first argument (handed over in place), and the event's name and the query.
    static let specs = [
        ProtocolSpec(framing: .socketio, seq: "1.seq", stream: "1.stream"),
        ProtocolSpec(framing: .socketio, seq: "1.seq", stream: "query:stream", ignore: ["type": ["hello"]]),
    ]

    /// The byte streams (upstream, downstream) of two upgraded Socket.IO client connections.
    static func traffic(_ generator: inout SeededGenerator, deflate: Bool) -> (streams: [[[UInt8]]], gates: [(upstream: Int, downstream: Int)]) {
        let connections = (1...2).map { client in
            let extensions = deflate ? ["Sec-WebSocket-Extensions: permessage-deflate"] : []
            let target = "/socket.io/?EIO=4&transport=websocket&stream=q\(client)"
            let request = W.request(target: target, headers: extensions)
            let response = W.response(extensions: deflate ? "permessage-deflate" : nil)
            var up = W.Leg(bytes: request, deflater: deflate ? Deflater() : nil, mask: W.clientMask)
            var down = W.Leg(bytes: response, deflater: deflate ? Deflater() : nil, mask: nil)
            up.send("2probe")
            down.send("3probe")
            up.send("5")
            up.send(#"40{"token":"t\#(client)"}"#)
            down.send(#"40{"sid":"s\#(client)"}"#)
            var seqs = [1, 1]
            for _ in 0..<120 {
                let slot = Int.random(in: 0...1, using: &generator)
                let roll = Int.random(in: 0..<20, using: &generator)
                let pad = String(repeating: "x", count: Int.random(in: 0...80, using: &generator))
                let seq = seqs[slot]
                if roll != 0 { seqs[slot] += roll == 1 ? 2 : 1 }
                let name = slot == 0 ? "pos" : "tick"
                let argument = #"{"seq":\#(seq),"stream":"s\#(client)-\#(slot)","pad":"\#(pad)"}"#
                let fragments = Int.random(in: 1...3, using: &generator)
                let compress = Int.random(in: 0..<5, using: &generator) != 0
                let text: String
                switch roll {
                case 0: text = #"42["hello",{"type":"hello"}]"#
                case 2: text = #"451-["\#(name)",\#(argument),{"_placeholder":true,"num":0}]"#
                default: text = #"42["\#(name)",\#(argument)]"#
                }
                if slot == 0 {
                    up.send(text, fragments: fragments, compress: compress)
                    if roll == 2 { up.send("\u{1}\u{2}\u{3}", binary: true) }
                } else {
                    down.send(text, fragments: fragments, compress: compress)
                    if roll == 2 { down.send("\u{4}\u{5}", binary: true) }
                }
                if roll == 3 {
                    down.send("2")
                    up.send("3")
                }
            }
            return (streams: [up.bytes, down.bytes], gate: (upstream: request.count, downstream: response.count))
        }
        return (connections.map(\.streams), connections.map(\.gate))
    }

    @Test(
        "random Socket.IO traffic over WebSocket of 24 seeds, two specs, with and without deflate: the whole AuditResult is equal with shared buffers and with copies",
        arguments: Array(UInt64(1)...24)
    )
    func sharedEqualsCopies(seed: UInt64) throws {
        let spec = Self.specs[Int(seed % 2)]
        let deflate = (seed / 2).isMultiple(of: 2)
        var generator = SeededGenerator(seed: seed)
        let (streams, gates) = Self.traffic(&generator, deflate: deflate)
        let shared = try RelayedTraffic.sharedEqualsCopies(streams, gates: gates, spec: spec, seed: seed, generator: generator)
        let events = try #require(shared.protocolEvents)
        #expect(
            shared.totals.sent > 100 && shared.totals.delivered > 50 && events.pings > 0 && events[counter: "sioConnects"] > 0,
            "the traffic exercises the kinds: \(shared.totals) \(events)"
        )
    }
}
