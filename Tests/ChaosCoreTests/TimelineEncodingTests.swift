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
        ("grpc", nil, 0x4db640d3953d076d), ("grpc", 7, 0x7fc0dd653fc5231d),
        ("half-open", nil, 0xedd86a420eba8040), ("half-open", 7, 0x227df4ee8d9fd015), ("half-open", 11, 0xed7236cdcd39407f),
        ("handoff", nil, 0x3efb78a76c04c903), ("handoff", 7, 0x2eec3308c21088b1), ("handoff", 23, 0xf4bbc316b4c30350),
        ("herd", nil, 0x901836ebb5001f41), ("herd", 7, 0xd2793fc18872806c), ("herd", 5, 0xceb559ebe7aaada6),
        ("naive", nil, 0xef9f359b5e90c750), ("naive", 7, 0x7feab632e5060c3e),
        // The quickstart gained an mtu and a loss fault (2026-11-26): its files changed with it, every other one did not.
        // The lte and 3g profiles gained their radio (2026-11-27): every file that names one changed with them; the
        // quickstart gained a radio and a nat fault.
        ("quickstart", nil, 0xa7876bcbe3872c09), ("quickstart", 7, 0xbb9dab19e0135567), ("quickstart", 42, 0x78c494f20784cba1),
        ("soak-72h", nil, 0xa5390822cece31e7), ("soak-72h", 7, 0x34a1641b316660b6), ("soak-72h", 1, 0x1f63e305df78a276),
        ("websocket", nil, 0x9a226cf57cd98470), ("websocket", 7, 0x5aa3df5101e634f5),
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
