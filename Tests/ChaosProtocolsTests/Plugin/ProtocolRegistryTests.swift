import ChaosCore
import Testing

@testable import ChaosProtocols

@Suite("The protocol registry: every plug-in found by its name and by the framing it reads, with its options checked")
struct ProtocolRegistryTests {
    @Test("each plug-in is found by its name, reads the framing it makes, and no other plug-in reads it")
    func namesAndFramings() throws {
        #expect(ProtocolRegistry.names == ["lines", "length-prefixed", "websocket", "grpc", "sse", "mqtt", "socketio", "datagram", "http3", "auto"])
        for plugin in ProtocolRegistry.plugins {
            #expect(ProtocolRegistry.plugin(named: plugin.name)?.name == plugin.name)
            let framing = try plugin.framing(options: [:])
            #expect(try ProtocolRegistry.plugin(reading: framing).name == plugin.name)
            #expect(framing.name == plugin.name && ProtocolRegistry.catalog.traits(named: framing.name) == plugin)
        }
        #expect(ProtocolRegistry.plugin(named: "amqp") == nil)
        #expect(GRPCProtocol.defaultFormat == .protobuf && GRPCProtocol.defaultStream == "rpc" && GRPCProtocol.hasRPCs)
        #expect(WebSocketProtocol.defaultFormat == .json && !WebSocketProtocol.hasRPCs)
        #expect(HTTP3Protocol.readsQUICStreams && ProtocolRegistry.plugins.filter { $0.readsQUICStreams }.map { $0.name } == ["http3"])
        #expect(ProtocolRegistry.plugin(named: "h3")?.name == "http3")
    }

    @Test("a plug-in's options: length-prefixed takes length_bytes 1, 2 or 4 and length_offset -8...8; the others take none")
    func options() throws {
        #expect(try LengthPrefixedProtocol.framing(options: [:]) == .lengthPrefixed(bytes: 4, offset: 0))
        #expect(try LengthPrefixedProtocol.framing(options: ["length_bytes": 2, "length_offset": -2]) == .lengthPrefixed(bytes: 2, offset: -2))
        for (options, message) in [
            (["length_bytes": 3], "protocol.length_bytes must be 1, 2 or 4, found 3"),
            (["length_offset": 9], "protocol.length_offset must be within -8...8, found 9"),
            (["width": 2], "protocol.width is not an option of framing length-prefixed"),
        ] {
            let error = try #require(throws: FramingOptionProblem.self) { try LengthPrefixedProtocol.framing(options: options) }
            #expect(error.message == message)
        }
        let error = try #require(throws: FramingOptionProblem.self) { try LinesProtocol.framing(options: ["length_bytes": 2]) }
        #expect(error.message == "protocol.length_bytes is not an option of framing lines")
        let built = try #require(throws: ChaosError.self) {
            try LengthPrefixedProtocol.framer(ProtocolSpec(framing: .lengthPrefixed(bytes: 3, offset: 0)), auditedMethods: nil)
        }
        #expect(built.message == "protocol.length_bytes must be 1, 2 or 4, found 3")
    }
}
