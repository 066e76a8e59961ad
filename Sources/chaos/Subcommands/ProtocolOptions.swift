import ArgumentParser
import ChaosCore
import ChaosProtocols
import Foundation

/// What to audit: a scenario's `protocol:` and `expect:` (`--protocol-from`), or the protocol given by flags.
/// Shared by `chaos audit` (always audits; the flags' defaults are newline JSON with `seq` and `stream`) and
/// `chaos proxy` (audits only when asked: `--protocol-from` or any of the flags).
struct ProtocolOptions: ParsableArguments {
    @Option(help: "Take protocol: and expect: from this scenario.")
    var protocolFrom: String?

    @Option(help: "A framing: \(ProtocolRegistry.names.joined(separator: " | ")) (default: lines).")
    var framing: String?

    @Option(help: "Length prefix size in bytes for length-prefixed framing: 1, 2 or 4 (default: 4).")
    var lengthBytes: Int?

    @Option(help: "json | text | protobuf (default: json; protobuf for --framing grpc).")
    var format: String?

    @Option(help: "gRPC: a FileDescriptorSet (protoc --include_imports -o FILE) that names protobuf fields.")
    var descriptors: String?

    @Option(help: "gRPC: an RPC to audit, /package.Service/Method (repeatable; default: every RPC).")
    var method: [String] = []

    @Option(help: "Where the sequence number is (JSON key or pointer, or regex group; default: seq).")
    var seq: String?

    @Option(help: "Where the logical stream name is (default: stream).")
    var stream: String?

    @Option(help: "Where a cumulative acknowledgement is.")
    var ack: String?

    @Option(help: "Message types not audited (repeatable).")
    var ignoreType: [String] = []

    @Option(help: "For --format text: a regular expression with named groups (seq, stream, type).")
    var regex: String?

    /// Whether any protocol flag was given (`--protocol-from` aside).
    var flagsGiven: Bool {
        framing != nil || lengthBytes != nil || format != nil || seq != nil || stream != nil || ack != nil
            || !ignoreType.isEmpty || regex != nil || descriptors != nil || !method.isEmpty
    }

    /// The scenario named by `--protocol-from`, loaded.
    func scenario() throws -> Scenario? { try protocolFrom.map { try Scenario.load(path: $0) } }

    /// The protocol to audit: the scenario's when it has one, else the flags'.
    func spec(from scenario: Scenario?) throws -> ProtocolSpec {
        if let spec = scenario?.protocolSpec { return spec }
        let name = framing ?? LinesProtocol.name
        guard let plugin = ProtocolRegistry.plugin(named: name) else {
            throw ChaosError.badInput("--framing must be one of \(ProtocolRegistry.names.joined(separator: ", ")), found '\(name)'")
        }
        var spec = ProtocolSpec(
            seq: seq ?? "seq",
            stream: stream ?? plugin.defaultStream,
            ack: ack,
            ignore: ignoreType.isEmpty ? [:] : ["type": ignoreType],
            regex: regex
        )
        do {
            // --length-bytes is length-prefixed's `length_bytes`; a framing without it ignores it.
            let given = lengthBytes.map { ["length_bytes": $0] } ?? [:]
            spec.framing = try plugin.framing(options: given.filter { plugin.optionKeys.contains($0.key) })
        } catch let problem as FramingOptionProblem {
            // Of the framing options, only length_bytes has a flag.
            throw ChaosError.badInput("--framing \(name): --\(problem.key.replacingOccurrences(of: "_", with: "-")) \(problem.problem)")
        }
        guard let parsed = ProtocolSpec.Format(rawValue: format ?? plugin.defaultFormat.rawValue) else {
            throw ChaosError.badInput("--format must be json, text or protobuf, found '\(format ?? "")'")
        }
        spec.format = parsed
        if parsed == .text, regex == nil { throw ChaosError.badInput("--format text needs --regex") }
        if !plugin.hasRPCs, descriptors != nil || !method.isEmpty {
            throw ChaosError.badInput("--descriptors and --method are for --framing grpc")
        }
        spec.methods = method.isEmpty ? nil : method
        if let descriptors {
            spec.descriptors =
                descriptors.hasPrefix("/")
                ? descriptors
                : FileManager.default.currentDirectoryPath + "/" + descriptors
        }
        try spec.checkInvariants { ChaosError.badInput($0) }
        return spec
    }
}
