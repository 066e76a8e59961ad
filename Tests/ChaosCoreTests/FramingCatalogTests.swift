import Foundation
import Testing

@testable import ChaosCore

/// ChaosCore knows no framing by name: a framing it has never heard of, given only as a ``FramingTraits`` type in
/// the catalog, is read, defaulted, checked and written like the plug-ins' own.
@Suite("Framing catalog")
struct FramingCatalogTests {
    /// A framing ChaosCore has no line about: options, a default format and stream, a stream-key prefix, RPCs.
    enum TopicFrames: FramingTraits {
        static let names = ["topic-frames", "topics"]
        static let optionKeys = ["topic_bytes"]
        static let defaultFormat = ProtocolSpec.Format.text
        static let defaultStream = "rpc"
        static let hasRPCs = true
        static let streamKeyPrefixes = ["header:"]

        static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing {
            let framing = ProtocolSpec.Framing(name: name, options: ["width": options["topic_bytes"] ?? 2])
            try check(framing)
            return framing
        }

        static func check(_ framing: ProtocolSpec.Framing) throws {
            guard let width = framing.options["width"], (1...8).contains(width) else {
                throw FramingOptionProblem("topic_bytes", "must be within 1...8, found \(framing.options["width"] ?? 0)")
            }
        }
    }

    enum PlainLines: FramingTraits {
        static let names = ["lines"]
        static let carriesBinary = false
    }

    static let catalog = FramingCatalog([PlainLines.self, TopicFrames.self])

    static func scenario(_ block: String) -> String {
        """
        name: topics
        duration: 10s
        proxies:
          - {name: p, listen: "127.0.0.1:7000", upstream: "127.0.0.1:7001"}
        protocol:
        \(block)
        """
    }

    @Test("a framing given only in the catalog is read by any of its names, with its options and defaults")
    func readsAnUnknownFraming() throws {
        let scenario = try Scenario.parse(
            yaml: Self.scenario("  framing: topics\n  topic_bytes: 4\n  regex: '(?<seq>\\\\d+)'"),
            file: "t.yaml",
            framings: Self.catalog
        )
        let spec = try #require(scenario.protocolSpec)
        #expect(spec.framing == ProtocolSpec.Framing(name: "topic-frames", options: ["width": 4]))
        #expect(spec.format == .text && spec.stream == "rpc" && spec.streamSource == .rpc)
        let json = try JSONEncoder().encode(spec.framing)
        #expect(String(decoding: json, as: UTF8.self) == #"{"topicFrames":{"width":4}}"#)
        #expect(try JSONDecoder().decode(ProtocolSpec.Framing.self, from: json) == spec.framing)
        try scenario.checkInvariants(source: "t.yaml", framings: Self.catalog)
    }

    @Test("its checks come from its traits: an option out of range at its line, a prefix it gives no meaning, a name not in the catalog")
    func checksFromTraits() {
        for (block, at, message) in [
            ("  framing: topics\n  topic_bytes: 9\n  regex: x", "7:16", "protocol.topic_bytes must be within 1...8, found 9"),
            (
                "  framing: topics\n  stream: query:q\n  regex: x", "7:11",
                "query:NAME names a query parameter of the request that opened the stream; it needs framing "
            ),
            ("  framing: grpc", "6:12", "protocol.framing must be one of lines, topic-frames, found 'grpc'"),
            ("  framing: lines\n  topic_bytes: 2", "7:16", "protocol.topic_bytes is not an option of framing lines"),
        ] {
            let error = #expect(throws: ChaosError.self) {
                try Scenario.parse(yaml: Self.scenario(block), file: "t.yaml", framings: Self.catalog)
            }
            #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
            #expect(error?.location.map { "\($0.line):\($0.column)" } == at, "\(block)")
        }
    }

    @Test("a run folder's framing goes through the same traits: an unknown name or a damaged option is bad input naming the field")
    func invariantsFromTraits() {
        for (framing, message) in [
            (ProtocolSpec.Framing(name: "topic-frames", options: ["width": 0]), "t.json: protocol.topic_bytes must be within 1...8, found 0"),
            (ProtocolSpec.Framing(name: "carrier-pigeon"), "t.json: protocol.framing must be one of lines, topic-frames, found 'carrier-pigeon'"),
        ] {
            let error = #expect(throws: ChaosError.self) {
                try ProtocolSpec(framing: framing, format: .text, regex: "x").checkInvariants(framings: Self.catalog) { .badInput("t.json: \($0)") }
            }
            #expect(error?.message == message)
        }
    }

    @Test("scenario.json keeps the framing as run folders always had it: {\"lengthPrefixed\":{\"bytes\":2,\"offset\":-2}}, {\"lines\":{}}")
    func codingKeys() throws {
        for (name, key) in [("length-prefixed", "lengthPrefixed"), ("lines", "lines"), ("sse", "sse"), ("a-b-c", "aBC")] {
            #expect(ProtocolSpec.Framing.codingKey(name) == key && ProtocolSpec.Framing.name(fromCodingKey: key) == name)
        }
        let old = #"{"lengthPrefixed":{"bytes":2,"offset":-2}}"#
        let framing = try JSONDecoder().decode(ProtocolSpec.Framing.self, from: Data(old.utf8))
        #expect(framing == ProtocolSpec.Framing(name: "length-prefixed", options: ["bytes": 2, "offset": -2]))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(framing), as: UTF8.self) == old)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ProtocolSpec.Framing.self, from: Data(#"{"a":{},"b":{}}"#.utf8)) }
    }
}
