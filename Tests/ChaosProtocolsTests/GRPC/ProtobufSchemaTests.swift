import ChaosCore
import Foundation
import Testing

@testable import ChaosProtocols

@Suite("Protobuf field names from a FileDescriptorSet")
struct ProtobufSchemaTests {
    static let protoset = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/protos/follow.protoset").path

    @Test("every framing with RPCs reads a descriptor set (auto as the gRPC it picks for h2); one without RPCs refuses it")
    func framingsWithRPCs() throws {
        let plugins = ProtocolRegistry.plugins.filter { $0.hasRPCs }
        #expect(plugins.map { $0.name } == ["grpc", "auto"])
        for plugin in plugins {
            #expect(try plugin.loadSchema(path: Self.protoset).calls.contains("/follow.v1.Follow/Race"), "\(plugin.name)")
        }
        #expect(throws: ChaosError.self) { try LinesProtocol.loadSchema(path: Self.protoset) }
    }

    @Test("each RPC's request and response types are known by its wire path")
    func methods() throws {
        let schema = try ProtobufSchema.load(path: Self.protoset)
        #expect(
            schema.methods["/follow.v1.Follow/Race"]
                == ProtobufSchema.Method(path: "/follow.v1.Follow/Race", input: "follow.v1.RaceRequest", output: "follow.v1.RaceUpdate")
        )
        #expect(schema.methods.count == 2)
        #expect(schema.hasMessage("google.protobuf.Timestamp"), "imports are included")
    }

    @Test("field names resolve per message type, nested paths, zigzag and text fields; numbers pass through")
    func fields() throws {
        let schema = try ProtobufSchema.load(path: Self.protoset)
        #expect(try schema.field("sequence_id", in: "follow.v1.RaceRequest") == .init(path: [2], zigzag: false, isText: false))
        #expect(try schema.field("sequence_id", in: "follow.v1.RaceUpdate").path == [3], "request and response types differ")
        #expect(try schema.field("meta.seq", in: "follow.v1.RaceRequest") == .init(path: [4, 2], zigzag: true, isText: false))
        #expect(try schema.field("session_id", in: "follow.v1.RaceRequest").isText)
        #expect(try schema.field("at.seconds", in: "follow.v1.RaceUpdate").path == [2, 1])
        #expect(try schema.field("4.1", in: "follow.v1.RaceRequest").path == [4, 1])
    }

    @Test("a field that is not there names the message's fields; a scalar cannot be entered")
    func unknownFields() throws {
        let schema = try ProtobufSchema.load(path: Self.protoset)
        let error = try #require(throws: ChaosError.self) { try schema.field("seq", in: "follow.v1.RaceRequest") }
        #expect(error.message.contains("no field 'seq' in follow.v1.RaceRequest; its fields are: acked_sequence_id, kind, meta"))
        #expect(throws: ChaosError.self) { try schema.field("sequence_id.x", in: "follow.v1.RaceRequest") }
        #expect(throws: ChaosError.self) { try schema.field("x", in: "follow.v1.Nothing") }
    }

    @Test("bytes that are not a FileDescriptorSet are bad input naming the file, never a crash")
    func garbage() {
        for data in [Data("not a protoset".utf8), Data(), Data([0x0a, 0xff, 0xff, 0xff])] {
            #expect(throws: ChaosError.self) { try ProtobufSchema(fileDescriptorSet: data, source: "x.protoset") }
        }
    }
}
