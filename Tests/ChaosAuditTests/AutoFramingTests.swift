import ChaosCore
import ChaosProtocols
import Testing

@testable import ChaosAudit

/// `framing: auto`: each connection audited as WebSocket or gRPC, chosen by the TLS ALPN a decrypted capture tells
/// or by the connection's first bytes, with the same counts as the framing named outright.
@Suite("framing: auto")
struct AutoFramingTests {
    typealias W = WebSocketWire
    typealias G = GRPCWire

    static func auto(_ spec: ProtocolSpec) -> ProtocolSpec {
        var spec = spec
        spec.framing = .auto
        return spec
    }

    static func audit(_ events: [TrafficEvent], _ spec: ProtocolSpec) throws -> AuditResult {
        let engine = try AuditEngine(spec: spec)
        engine.ingest(events)
        return engine.finish()
    }

    /// A WebSocket connection whose upgrade and messages each way are relayed, then a resume on a second one.
    static func websocketScript() -> TrafficScript {
        var s = TrafficScript()
        WebSocketAuditTests.open(&s, 1)
        for seq in 1...3 { WebSocketAuditTests.relay(&s, 1, W.text(WebSocketAuditTests.message(seq), mask: W.clientMask), .upstream) }
        for seq in 1...3 { WebSocketAuditTests.relay(&s, 1, W.text(WebSocketAuditTests.message(seq)), .downstream) }
        s.at(1)
        s.close(1, .reset)
        WebSocketAuditTests.open(&s, 2)
        for seq in [3, 5] { WebSocketAuditTests.relay(&s, 2, W.text(WebSocketAuditTests.message(seq)), .downstream) }
        s.close(2)
        return s
    }

    @Test("a WebSocket pair audits under auto exactly as under websocket, from its first bytes or its ALPN")
    func websocket() throws {
        let s = Self.websocketScript()
        let spec = WebSocketAuditTests.spec()
        let named = try Self.audit(s.events, spec)
        let sniffed = try Self.audit(s.events, Self.auto(spec))
        #expect(named.streams == sniffed.streams && named.totals == sniffed.totals)
        #expect(sniffed.protocolEvents?.upgrades == 2 && sniffed.totals.ok == 7 && sniffed.totals.lost == 1)
        // ALPN http/1.1 told before the first byte.
        var told = s.events
        told.insert(TrafficEvent(time: 0, connection: 1, kind: .tls(.negotiated(alpn: "http/1.1", version: "TLS 1.3", suite: "x"))), at: 1)
        #expect(try Self.audit(told, Self.auto(spec)).streams == named.streams)
    }

    @Test("a gRPC pair audits under auto exactly as under grpc, the server's SETTINGS arriving before the client's preface")
    func grpc() throws {
        let s = GRPCAuditTests.resumedSession()
        let named = try Self.audit(s.events, GRPCAuditTests.numbered)
        let sniffed = try Self.audit(s.events, Self.auto(GRPCAuditTests.numbered))
        #expect(!named.streams.isEmpty && named.streams == sniffed.streams && named.totals == sniffed.totals)
        #expect(sniffed.protocolEvents?.calls == named.protocolEvents?.calls)
        // The server's bytes first: held until the client's preface decides, positions kept.
        var serverFirst: [TrafficEvent] = []
        for event in s.events {
            if case .read(.client, let bytes) = event.kind, bytes.starts(with: G.preface), let last = serverFirst.popLast() {
                serverFirst.append(event)
                serverFirst.append(last)
            } else {
                serverFirst.append(event)
            }
        }
        #expect(try Self.audit(serverFirst, Self.auto(GRPCAuditTests.numbered)).totals == named.totals)
    }

    @Test("ALPN h2 wins over the first bytes; bytes that are neither protocol are a protocol anomaly, not a crash")
    func alpnAndGarbage() throws {
        var s = TrafficScript()
        s.open(1)
        s.add(1, .tls(.negotiated(alpn: "h2", version: "TLS 1.2", suite: "x")))
        // An HTTP/1.1 request on a connection whose ALPN said h2: read as HTTP/2, which it is not.
        s.sendBytes(1, .upstream, W.request(headers: ["X-Stream: c1"]))
        let told = try Self.audit(s.events, Self.auto(WebSocketAuditTests.spec()))
        #expect(told.protocolEvents?.upgrades ?? 0 == 0)
        #expect(told.anomalies.contains { $0.kind == .protocolError })

        var garbage = TrafficScript()
        garbage.open(1)
        garbage.sendBytes(1, .downstream, [UInt8](repeating: 0x41, count: 70_000))
        let result = try Self.audit(garbage.events, Self.auto(WebSocketAuditTests.spec()))
        #expect(result.anomalies.contains { $0.kind == .protocolError && ($0.detail ?? "").contains("framing auto") })
    }
}
