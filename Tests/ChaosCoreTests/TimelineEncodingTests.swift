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
        ("grpc", nil, 0x410d_eb88_3b32_d222), ("grpc", 7, 0x7fc0_dd65_3fc5_231d),
        ("half-open", nil, 0x9709_cdb6_43a0_9735), ("half-open", 7, 0x227d_f4ee_8d9f_d015), ("half-open", 11, 0xed72_36cd_cd39_407f),
        ("handoff", nil, 0x6ad8_78f5_508f_cbf3), ("handoff", 7, 0x2eec_3308_c210_88b1), ("handoff", 23, 0xf4bb_c316_b4c3_0350),
        ("herd", nil, 0x83d3_601d_fad9_7e8c), ("herd", 7, 0xd279_3fc1_8872_806c), ("herd", 5, 0xceb5_59eb_e7aa_ada6),
        ("naive", nil, 0x9cb7_9499_8fa3_b272), ("naive", 7, 0x7fea_b632_e506_0c3e),
        // The quickstart gained an mtu and a loss fault (2026-11-26): its files changed with it, every other one did not.
        // The lte and 3g profiles gained their radio (2026-11-27): every file that names one changed with them; the
        // quickstart gained a radio and a nat fault. Every shipped pair's client says `ready: connected` (2026-11-28):
        // each scenario.json changed with it, and no timeline.json did. websocket.yaml's partition lasts 8 s (2026-12-01):
        // its two files changed with it.
        ("quickstart", nil, 0x01cd_f7d9_c09b_86af), ("quickstart", 7, 0xbb9d_ab19_e013_5567), ("quickstart", 42, 0x78c4_94f2_0784_cba1),
        ("soak-72h", nil, 0x2014_efa3_2ad3_d4bf), ("soak-72h", 7, 0x34a1_641b_3166_60b6), ("soak-72h", 1, 0x1f63_e305_df78_a276),
        ("websocket", nil, 0x92eb_67fa_d67e_f43b), ("websocket", 7, 0xca59_aa86_bcd7_f1f3),
    ]

    static func fnv1a(_ bytes: Data) -> UInt64 {
        bytes.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    @Test("scenario.json and timeline.json are byte-identical to before", arguments: saved)
    func unchanged(name: String, seed: UInt64?, hash: UInt64) throws {
        var scenario = try Scenario.load(path: scenariosDirectory.appendingPathComponent("\(name).yaml").path)
        scenario.file = "Scenarios/\(name).yaml"  // as the hashes were taken, from the package's folder
        // A descriptor set's path is absolute once read: hashed relative to the package, wherever it is checked out.
        let package = scenariosDirectory.deletingLastPathComponent().path + "/"
        if let descriptors = scenario.protocolSpec?.descriptors, descriptors.hasPrefix(package) {
            scenario.protocolSpec?.descriptors = String(descriptors.dropFirst(package.count))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]  // as RunFolder writes them
        let data = try seed.map { try encoder.encode(Timeline(scenario: scenario, seed: $0)) } ?? encoder.encode(scenario)
        #expect(Self.fnv1a(data) == hash)
        // And they read back as what was saved.
        let decoder = JSONDecoder()
        let again =
            try seed == nil
            ? encoder.encode(decoder.decode(Scenario.self, from: data))
            : encoder.encode(decoder.decode(Timeline.self, from: data))
        #expect(again == data)
    }
}
