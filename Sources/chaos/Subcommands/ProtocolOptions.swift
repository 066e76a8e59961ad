import ArgumentParser
import ChaosCore
import Foundation

/// What to audit: a scenario's `protocol:` and `expect:` (`--protocol-from`), or the protocol given by flags.
/// Shared by `chaos audit` (always audits; the flags' defaults are newline JSON with `seq` and `stream`) and
/// `chaos proxy` (audits only when asked: `--protocol-from` or any of the flags).
struct ProtocolOptions: ParsableArguments {
    @Option(help: "Take protocol: and expect: from this scenario.")
    var protocolFrom: String?

    @Option(help: "lines | length-prefixed | websocket | grpc (default: lines).")
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
        var spec = ProtocolSpec(seq: seq ?? "seq", stream: stream ?? (framing == "grpc" ? "rpc" : "stream"), ack: ack,
                                ignore: ignoreType.isEmpty ? [:] : ["type": ignoreType], regex: regex)
        switch framing ?? "lines" {
        case "lines": spec.framing = .lines
        case "length-prefixed":
            let bytes = lengthBytes ?? 4
            guard [1, 2, 4].contains(bytes) else { throw ChaosError.badInput("--length-bytes must be 1, 2 or 4, found \(bytes)") }
            spec.framing = .lengthPrefixed(bytes: bytes, offset: 0)
        case "websocket": spec.framing = .websocket
        case "grpc": spec.framing = .grpc
        default: throw ChaosError.badInput("--framing must be lines, length-prefixed, websocket or grpc, found '\(framing ?? "")'")
        }
        guard let parsed = ProtocolSpec.Format(rawValue: format ?? (spec.framing == .grpc ? "protobuf" : "json")) else {
            throw ChaosError.badInput("--format must be json, text or protobuf, found '\(format ?? "")'")
        }
        spec.format = parsed
        if parsed == .text, regex == nil { throw ChaosError.badInput("--format text needs --regex") }
        if spec.framing != .grpc, descriptors != nil || !method.isEmpty {
            throw ChaosError.badInput("--descriptors and --method are for --framing grpc")
        }
        spec.methods = method.isEmpty ? nil : method
        if let descriptors {
            spec.descriptors = descriptors.hasPrefix("/") ? descriptors
                : FileManager.default.currentDirectoryPath + "/" + descriptors
        }
        try spec.checkInvariants { ChaosError.badInput($0) }
        return spec
    }
}
