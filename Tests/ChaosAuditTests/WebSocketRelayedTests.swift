import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// WebSocket audited in lockstep (after the handshake, a read the relay writes whole from its own buffer is decoded
/// once, its protocol events taken as read and as written) gives exactly what the same traffic gives when every write
/// is a copy of its own: random traffic of two connections, with and without permessage-deflate (the inflater's window
/// is handed over with the rest), messages split into fragments with pings between them, binary messages, pongs,
/// messages without a seq, gaps, cut into random reads, each read written whole
/// (shared buffer), in pieces, or not yet, with acknowledgements, a reset mid-stream and a message half read at the end,
/// compared whole, for the stream named in the message and by the handshake's header.
@Suite("WebSocket relayed: a read written whole from its own buffer audits as when written as a copy")
struct WebSocketRelayedTests {
    typealias W = WebSocketWire

    static let specs = [
        ProtocolSpec(framing: .websocket, seq: "seq", stream: "stream", ignore: ["type": ["hello"]]),
        ProtocolSpec(framing: .websocket, seq: "seq", stream: "header:x-stream"),
    ]

    /// The byte streams (upstream, downstream) of two connections.
    static func traffic(_ generator: inout SeededGenerator, deflate: Bool) -> (streams: [[[UInt8]]], gates: [(upstream: Int, downstream: Int)]) {
        let connections = (1...2).map { client in
            let headers = ["X-Stream: h\(client)"] + (deflate ? ["Sec-WebSocket-Extensions: permessage-deflate"] : [])
            let request = W.request(headers: headers)
            let response = W.response(extensions: deflate ? "permessage-deflate" : nil)
            var up = W.Leg(bytes: request, deflater: deflate ? Deflater() : nil, mask: W.clientMask)
            var down = W.Leg(bytes: response, deflater: deflate ? Deflater() : nil, mask: nil)
            var seqs = [1, 1]
            for _ in 0..<120 {
                let slot = Int.random(in: 0...1, using: &generator)
                let roll = Int.random(in: 0..<20, using: &generator)
                let pad = String(repeating: "y", count: Int.random(in: 0...90, using: &generator))
                let seq = seqs[slot]
                if roll != 0 { seqs[slot] += roll == 1 ? 2 : 1 }
                let text =
                    switch roll {
                    case 0: #"{"type":"hello"}"#
                    case 2: #"{"note":"no seq","pad":"\#(pad)"}"#
                    default: #"{"seq":\#(seq),"stream":"s\#(client)-\#(slot)","pad":"\#(pad)"}"#
                    }
                let fragments = Int.random(in: 1...3, using: &generator)
                let compress = Int.random(in: 0..<5, using: &generator) != 0
                if slot == 0 {
                    up.send(text, binary: roll == 4, fragments: fragments, compress: compress)
                } else {
                    down.send(text, binary: roll == 4, fragments: fragments, compress: compress)
                }
                if roll == 3 { down.bytes += W.frame(10, Array("p".utf8)) }
            }
            return (streams: [up.bytes, down.bytes], gate: (upstream: request.count, downstream: response.count))
        }
        return (connections.map(\.streams), connections.map(\.gate))
    }

    @Test(
        "random WebSocket traffic of 24 seeds, two specs, with and without deflate: the whole AuditResult is equal with shared buffers and with copies",
        arguments: Array(UInt64(1)...24)
    )
    func sharedEqualsCopies(seed: UInt64) throws {
        let spec = Self.specs[Int(seed % 2)]
        var generator = SeededGenerator(seed: seed)
        let (streams, gates) = Self.traffic(&generator, deflate: (seed / 2).isMultiple(of: 2))
        let shared = try RelayedTraffic.sharedEqualsCopies(streams, gates: gates, spec: spec, seed: seed, generator: generator)
        let events = try #require(shared.protocolEvents)
        #expect(shared.totals.sent > 100 && shared.totals.delivered > 50 && events.pings > 0, "the traffic exercises the kinds: \(shared.totals)")
    }
}
