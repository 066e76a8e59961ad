import Foundation
import Testing

/// The seam between the core and the protocol plug-ins: a protocol is one folder of ChaosProtocols, and the modules
/// that read scenarios, apply faults, audit, run and report know none by name (its faults, options, schema and
/// counters come from its plug-in's declarations).
@Suite("No protocol by name outside its plug-in")
struct ProtocolFreeCoreTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let modules = ["ChaosCore", "ChaosAudit", "ChaosControl", "ChaosRunner", "ChaosReport"]
    /// Protocol names as code or prose would write them (case-insensitive).
    static let names = try! NSRegularExpression(
        pattern: #"mqtt|websocket|grpc|socket\.?io|\bsse\b|http/?2|\bh2c\b|goaway|ws-close"#,
        options: [.caseInsensitive]
    )

    @Test("no source line of the core, the audit, the control API, the runner or the report names a protocol")
    func noProtocolNames() throws {
        var found: [String] = []
        var files = 0
        for module in Self.modules {
            let folder = Self.root.appendingPathComponent("Sources/\(module)")
            let paths = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }
            for path in paths.sorted() where path.hasSuffix(".swift") {
                files += 1
                let text = try String(contentsOf: folder.appendingPathComponent(path), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let line = String(line)
                    if Self.names.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
                        found.append("Sources/\(module)/\(path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                    }
                }
            }
        }
        #expect(files > 100, "the sources were found (\(files) files)")
        #expect(found.isEmpty, "\(found.count) lines name a protocol:\n\(found.joined(separator: "\n"))")
    }
}
