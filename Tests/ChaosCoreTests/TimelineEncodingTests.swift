import ChaosCore
import ChaosProtocols
import Foundation
import Testing

/// What a run folder saves for `chaos replay` (scenario.json, timeline.json) stays byte for byte what the
/// shipped scenarios gave before: the same draws in the same order, and the same encoding (older run folders
/// replay). The hashes were taken from the release before fault parameters and effects became one type.
@Suite("The saved scenario and timeline of every shipped scenario")
struct TimelineEncodingTests {
    /// (scenario, seed or nil for scenario.json, FNV-1a 64 of the file as `RunFolder` writes it).
    static let saved: [(String, UInt64?, UInt64)] = [
        ("grpc", nil, 0x5ecb460e22aaa2bb), ("grpc", 7, 0xdb9930344bda2547),
        ("half-open", nil, 0xedd86a420eba8040), ("half-open", 7, 0x227df4ee8d9fd015), ("half-open", 11, 0xed7236cdcd39407f),
        ("handoff", nil, 0xd3da99101cef99bb), ("handoff", 7, 0x6b7665d8f2344625), ("handoff", 23, 0x548d1c0cbdae385e),
        ("herd", nil, 0x901836ebb5001f41), ("herd", 7, 0xd2793fc18872806c), ("herd", 5, 0xceb559ebe7aaada6),
        ("naive", nil, 0xef9f359b5e90c750), ("naive", 7, 0x7feab632e5060c3e),
        // The quickstart gained an mtu and a loss fault (2026-11-26): its files changed with it, every other one did not.
        ("quickstart", nil, 0xf836d90e9894162d), ("quickstart", 7, 0x5a9c544440d1e0ab), ("quickstart", 42, 0x212bdcab020783ba),
        ("soak-72h", nil, 0x1da02432263d35a3), ("soak-72h", 7, 0x7f11b736ae236676), ("soak-72h", 1, 0x25f38747792e4c00),
        ("websocket", nil, 0xdb27e9e5af2aa246), ("websocket", 7, 0xb12832f13f6e64af),
    ]

    static func fnv1a(_ bytes: Data) -> UInt64 {
        bytes.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    @Test("scenario.json and timeline.json are byte-identical to before", arguments: saved)
    func unchanged(name: String, seed: UInt64?, hash: UInt64) throws {
        var scenario = try Scenario.load(path: scenariosDirectory.appendingPathComponent("\(name).yaml").path)
        scenario.file = "Scenarios/\(name).yaml" // as the hashes were taken, from the package's folder
        // A descriptor set's path is absolute once read: hashed relative to the package, wherever it is checked out.
        let package = scenariosDirectory.deletingLastPathComponent().path + "/"
        if let descriptors = scenario.protocolSpec?.descriptors, descriptors.hasPrefix(package) {
            scenario.protocolSpec?.descriptors = String(descriptors.dropFirst(package.count))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys] // as RunFolder writes them
        let data = try seed.map { try encoder.encode(Timeline(scenario: scenario, seed: $0)) } ?? encoder.encode(scenario)
        #expect(Self.fnv1a(data) == hash)
        // And they read back as what was saved.
        let decoder = JSONDecoder()
        let again = try seed == nil ? encoder.encode(decoder.decode(Scenario.self, from: data))
            : encoder.encode(decoder.decode(Timeline.self, from: data))
        #expect(again == data)
    }
}
