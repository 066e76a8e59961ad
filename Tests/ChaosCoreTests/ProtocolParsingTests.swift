@testable import ChaosCore
import Testing

/// `protocol:` for WebSocket: header and query streams, per-direction overrides, ignore on any field, max_message.
@Suite("Protocol parsing")
struct ProtocolParsingTests {
    static func scenario(_ protocolBlock: String) -> String {
        """
        name: ws
        duration: 10s
        proxies:
          - {name: stream, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
        protocol:
        \(protocolBlock)
        """
    }

    @Test("a WebSocket protocol with a header stream, overrides, ignore on any field and a message cap parses to its model")
    func webSocket() throws {
        let text = Self.scenario("""
          framing: websocket
          stream: header:X-Session
          ack: ack
          max_message: 2MB
          ignore: {op: [hb, hello], type: PING}
          upstream: {seq: id, ignore: {kind: [x]}}
          downstream: {seq: n, stream: query:session, type: t}
        """)
        let spec = try #require(try Scenario.parse(yaml: text, file: "ws.yaml").protocolSpec)
        #expect(spec.framing == .websocket && spec.maxMessage == ByteSize.parse("2MB").map(Int.init))
        #expect(spec.ignore == ["op": ["hb", "hello"], "type": ["PING"]])
        #expect(spec.streamSource == .header("X-Session"))
        let up = spec.resolved(for: .upstream), down = spec.resolved(for: .downstream)
        #expect(up.seq == "id" && up.ignore == ["kind": ["x"]] && up.streamSource == .header("X-Session") && up.ack == "ack")
        #expect(down.seq == "n" && down.type == "t" && down.streamSource == .query("session") && down.ignore == spec.ignore)
        #expect(up.upstream == nil && down.downstream == nil)
    }

    @Test("protocol mistakes are errors at their line and column", arguments: [
        ("  framing: lines\n  stream: query:s", "7:11", "query:NAME names a part of the WebSocket upgrade request; it needs framing websocket"),
        ("  framing: websocket\n  stream: \"header:\"", "7:11", "protocol.stream header: needs a name after 'header:'"),
        ("  framing: websocket\n  max_message: 1GB2", "7:16", "protocol.max_message must be a size from 1KB to 1GB"),
        ("  framing: websocket\n  downstream: {sequence: n}", "7:16", "unknown key 'sequence' in protocol.downstream"),
        ("  framing: grpc", "6:12", "protocol.framing grpc is not supported by the audit yet"),
    ])
    func mistakes(block: String, at: String, message: String) {
        do {
            _ = try Scenario.parse(yaml: Self.scenario(block), file: "ws.yaml")
            Issue.record("no error for \(block)")
        } catch let error as ChaosError {
            #expect(error.message.contains(message), "\(error.message)")
            let location = error.location.map { "\($0.line):\($0.column)" }
            #expect(location == at, "\(location ?? "none")")
        } catch {
            Issue.record("\(error)")
        }
    }
}
