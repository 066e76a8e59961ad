import ChaosAudit
import ChaosCore
import ChaosProtocols
import Foundation

// `AuditBench websocket [MESSAGES]`: the WebSocket audit of ~100-byte JSON messages (server → client frames),
// without and with permessage-deflate (context takeover), as a ratio to the NDJSON lines path on the same messages.

/// Cuts `bytes` into reads of about 64 KiB.
private func reads(_ bytes: [UInt8]) -> [[UInt8]] {
    stride(from: 0, to: bytes.count, by: 65_519).map { Array(bytes[$0..<min(bytes.count, $0 + 65_519)]) }
}

/// Each message compressed with context takeover (RFC 7692 7.2.1).
private func deflated(_ messages: [[UInt8]]) -> [[UInt8]] {
    guard let deflater = Deflater() else { fatalError("zlib did not start") }
    return messages.map(deflater.compress)
}

/// Audits `chunks` as one connection's downstream (read from the server, written to the client, acknowledged),
/// after `upstream` (the client's bytes, such as a request that opens a call); returns messages per second.
func auditDownstream(_ spec: ProtocolSpec, _ chunks: [[UInt8]], expecting messages: Int, upstream: [UInt8] = []) throws -> Double {
    let engine = try AuditEngine(spec: spec)
    let endpoints = ConnectionEndpoints(proxy: "bench", client: "c", listen: "l", proxyLocal: "pl", server: "s")
    let time = seconds {
        engine.ingest(TrafficEvent(time: 0, connection: 1, kind: .opened(endpoints)))
        var now: Int64 = 1
        var written: Int64 = 0
        if !upstream.isEmpty {
            engine.ingest(TrafficEvent(time: now, connection: 1, kind: .read(.client, upstream)))
            engine.ingest(TrafficEvent(time: now, connection: 1, kind: .written(.server, upstream)))
            engine.ingest(TrafficEvent(time: now, connection: 1, kind: .acknowledged(.server, upTo: Int64(upstream.count))))
        }
        for chunk in chunks {
            engine.ingest(TrafficEvent(time: now, connection: 1, kind: .read(.server, chunk)))
            engine.ingest(TrafficEvent(time: now + 1000, connection: 1, kind: .written(.client, chunk)))
            written += Int64(chunk.count)
            engine.ingest(TrafficEvent(time: now + 2000, connection: 1, kind: .acknowledged(.client, upTo: written)))
            now += 1_000_000
        }
    }
    let result = engine.finish()
    precondition(result.totals.ok == Int64(messages) && result.totals.lost == 0, "the audit miscounted: \(result.totals)")
    return Double(messages) / time
}

func webSocketBench(messages: Int) throws {
    let bodies = (1...messages).map {
        Array("{\"type\":\"MSG\",\"stream\":\"c1\",\"seq\":\($0),\"payload\":\"\(String(repeating: "x", count: 48))\"}".utf8)
    }
    let response = Array(
        ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n").utf8
    )
    let lines = reads(bodies.flatMap { $0 + [10] })
    let plain = reads(response + bodies.flatMap { [0x81, UInt8($0.count)] + $0 })
    let compressed = reads(response + deflated(bodies).flatMap { [0xC1, UInt8($0.count)] + $0 })
    let linesRate = try auditDownstream(ProtocolSpec(), lines, expecting: messages)
    let plainRate = try auditDownstream(ProtocolSpec(framing: .websocket), plain, expecting: messages)
    let deflateRate = try auditDownstream(ProtocolSpec(framing: .websocket), compressed, expecting: messages)
    print("websocket: \(messages) JSON messages of ~\(bodies[messages / 2].count) bytes, server -> client, each decoded as sent and as delivered")
    print(String(format: "  lines              %.2f M messages/s", linesRate / 1e6))
    print(String(format: "  websocket          %.2f M messages/s  ratio to lines %.2f (target >= 0.5)", plainRate / 1e6, plainRate / linesRate))
    print(
        String(
            format: "  websocket+deflate  %.2f M messages/s  ratio to lines %.2f (target >= 300,000/s: %@)",
            deflateRate / 1e6,
            deflateRate / linesRate,
            deflateRate >= 300_000 ? "met" : "NOT met"
        )
    )
}
