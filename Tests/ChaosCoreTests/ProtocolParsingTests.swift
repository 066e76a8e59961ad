import ChaosProtocols
import Foundation
import Testing

@testable import ChaosCore

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

    static let protoset = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/protos/follow.protoset").path

    @Test("a gRPC protocol: protobuf by default, descriptors relative to the scenario's folder, methods, a metadata stream, per-direction fields")
    func grpc() throws {
        let text = Self.scenario(
            """
              framing: grpc
              descriptors: ../protos/follow.protoset
              methods: [/follow.v1.Follow/Race]
              seq: sequence_id
              stream: header:x-session
              ack: acked_sequence_id
              ignore: {kind: [HELLO]}
              downstream: {seq: 3}
            """
        )
        let file = URL(fileURLWithPath: Self.protoset).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scenarios/grpc.yaml").path
        let spec = try #require(try Scenario.parse(yaml: text, file: file).protocolSpec)
        #expect(spec.framing == .grpc && spec.format == .protobuf && spec.methods == ["/follow.v1.Follow/Race"])
        #expect(spec.descriptors == Self.protoset && spec.streamSource == .header("x-session"))
        #expect(spec.resolved(for: .downstream).seq == "3" && spec.resolved(for: .upstream).seq == "sequence_id")
        let rpc = try #require(try Scenario.parse(yaml: Self.scenario("  framing: grpc\n  stream: rpc\n  seq: 2"), file: "g.yaml").protocolSpec)
        #expect(rpc.streamSource == .rpc && rpc.format == .protobuf)
    }

    @Test("gRPC by field numbers alone: per-direction blocks that give every field need no shared seq, whatever it says")
    func grpcPerDirectionNumbers() throws {
        for shared in ["", "\n  seq: sequence_id\n  ack: acked_sequence_id"] {
            let text = Self.scenario(
                """
                  framing: grpc
                  stream: header:x-session\(shared)
                  upstream: {seq: "2", ack: "3"}
                  downstream: {seq: "3", ack: "6"}
                """
            )
            let spec = try #require(try Scenario.parse(yaml: text, file: "g.yaml").protocolSpec)
            #expect(spec.format == .protobuf && spec.descriptors == nil)
            #expect(spec.resolved(for: .upstream).seq == "2" && spec.resolved(for: .upstream).ack == "3")
            #expect(spec.resolved(for: .downstream).seq == "3" && spec.resolved(for: .downstream).ack == "6")
        }
    }

    @Test("a WebSocket protocol with a header stream, overrides, ignore on any field and a message cap parses to its model")
    func webSocket() throws {
        let text = Self.scenario(
            """
              framing: websocket
              stream: header:X-Session
              ack: ack
              max_message: 2MB
              ignore: {op: [hb, hello], type: PING}
              upstream: {seq: id, ignore: {kind: [x]}}
              downstream: {seq: n, stream: query:session, type: t}
            """
        )
        let spec = try #require(try Scenario.parse(yaml: text, file: "ws.yaml").protocolSpec)
        #expect(spec.framing == .websocket && spec.maxMessage == ByteSize.parse("2MB").map(Int.init))
        #expect(spec.ignore == ["op": ["hb", "hello"], "type": ["PING"]])
        #expect(spec.streamSource == .header("X-Session"))
        let up = spec.resolved(for: .upstream)
        let down = spec.resolved(for: .downstream)
        #expect(up.seq == "id" && up.ignore == ["kind": ["x"]] && up.streamSource == .header("X-Session") && up.ack == "ack")
        #expect(down.seq == "n" && down.type == "t" && down.streamSource == .query("session") && down.ignore == spec.ignore)
        #expect(up.upstream == nil && down.downstream == nil)
    }

    @Test(
        "protocol mistakes are errors at their line and column",
        arguments: [
            (
                "  framing: lines\n  stream: query:s", "7:11",
                "query:NAME names a query parameter of the request that opened the stream; it needs framing websocket, sse, socketio, http3 or auto"
            ),
            ("  framing: websocket\n  stream: \"header:\"", "7:11", "protocol.stream header: needs a name after 'header:'"),
            ("  framing: websocket\n  max_message: 1GB2", "7:16", "protocol.max_message must be a size from 1KB to 1GB"),
            ("  framing: websocket\n  downstream: {sequence: n}", "7:16", "unknown key 'sequence' in protocol.downstream"),
            (
                "  framing: grpc\n  stream: query:s", "7:11",
                "query:NAME names a query parameter of the request that opened the stream; it needs framing websocket, sse, socketio, http3 or auto"
            ),
            ("  framing: websocket\n  methods: [/a.B/C]", "7:12", "protocol.methods is for framing grpc"),
            ("  framing: grpc\n  methods: [Race]", "7:13", "protocol.methods: 'Race' is not an RPC path like /package.Service/Method"),
            ("  framing: grpc\n  descriptors: nowhere.protoset", "7:16", "protocol.descriptors: cannot read the descriptor set"),
            ("  framing: grpc\n  descriptors: /dev/zero", "7:16", "protocol.descriptors: the descriptor set '/dev/zero' is not a regular file"),
            (
                "  framing: grpc\n  descriptors: \(Self.protoset.dropLast(3))", "7:16",
                "follow.proto: not a FileDescriptorSet (protoc --include_imports -o FILE"
            ),
            (
                "  framing: grpc\n  descriptors: \(Self.protoset)\n  seq: sequence", "8:8",
                "nor in the request of any other audited RPC"
            ),
            (
                "  framing: grpc\n  descriptors: \(Self.protoset)\n  methods: [/follow.v1.Follow/Race]\n  seq: sequence", "9:8",
                "'sequence' in the request of /follow.v1.Follow/Race (follow.v1.RaceRequest): no field 'sequence' in follow.v1.RaceRequest; its fields are: acked_sequence_id, kind, meta, sequence_id, session_id"
            ),
            (
                "  framing: grpc\n  descriptors: \(Self.protoset)\n  seq: sequence_id\n  downstream: {ack: acked}", "9:21",
                "'acked' in the response of /follow.v1.Follow/"
            ),
            (
                "  framing: grpc\n  descriptors: \(Self.protoset)\n  methods: [/follow.v1.Follow/Walk]", "8:13",
                "no RPC /follow.v1.Follow/Walk in"
            ),
            ("  framing: grpc\n  format: json\n  descriptors: \(Self.protoset)", "8:16", "it needs format protobuf"),
            (
                "  framing: grpc\n  upstream: {seq: '2'}\n  downstream: {ack: '6'}", "6:3",
                "found 'seq' (read downstream, a default: give it in protocol.downstream)"
            ),
            ("  framing: grpc\n  seq: '2'\n  downstream: {seq: '3', ack: acked}", "8:31", "found 'acked' (read downstream)"),
            (
                "  framing: lines\n  stream: rpc", "7:11",
                "protocol.stream rpc (each call a stream) needs framing grpc or auto; a field named rpc is /rpc"
            ),
            ("  framing: websocket\n  downstream: {stream: rpc}", "7:24", "protocol.downstream.stream rpc (each call a stream) needs framing grpc"),
            ("  framing: lines\n  length_bytes: 2", "7:17", "protocol.length_bytes is not an option of framing lines"),
            ("  framing: length-prefixed\n  length_bytes: 3", "7:17", "protocol.length_bytes must be 1, 2 or 4, found 3"),
            ("  framing: length-prefixed\n  length_offset: -9", "7:18", "protocol.length_offset must be within -8...8, found -9"),
            (
                "  framing: amqp", "6:12",
                "protocol.framing must be one of lines, length-prefixed, websocket, grpc, sse, mqtt, socketio, datagram, http3, auto, found 'amqp'"
            ),
            (
                "  framing: http3", "6:12",
                "protocol.framing http3 reads HTTP/3 on QUIC streams: it needs protocol.transport: quic, with protocol.keylog and a udp:// proxy"
            ),
            (
                "  framing: sse\n  format: protobuf", "7:11",
                "protocol.format protobuf needs binary messages: framing length-prefixed, websocket, grpc, mqtt, datagram or auto"
            ),
        ]
    )
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
