package import ChaosCore
package import Foundation
import SwiftProtobuf

/// The messages and services of a FileDescriptorSet (`protoc --include_imports -o FILE …`), read with
/// swift-protobuf's descriptor types: it names fields, so a scenario can say `seq: sequence_id` instead of a
/// field number, and it knows each RPC's request and response types (which differ, so each direction of a gRPC
/// call resolves its own fields).
package struct ProtobufSchema: Sendable {
    /// One RPC of a service.
    package struct Method: Sendable, Equatable {
        /// `/package.Service/Method`, as on the wire in `:path`.
        package var path: String
        /// The request message's full name (`follow.v1.RaceRequest`).
        package var input: String
        /// The response message's full name.
        package var output: String
    }

    /// A field name resolved to where the wire format carries it.
    package struct Field: Sendable, Equatable {
        /// Field numbers from the outer message in (`[4, 2]` for `meta.seq`).
        package var path: [UInt64]
        /// Whether the last field is `sint32` / `sint64` (zigzag varints).
        package var zigzag: Bool
        /// Whether the last field is a `string` or `bytes` field (length-delimited text).
        package var isText: Bool
    }

    struct FieldInfo: Sendable {
        var number: UInt64
        var type: Google_Protobuf_FieldDescriptorProto.TypeEnum
        var messageType: String
    }

    /// Full message name → field name → field.
    private let messages: [String: [String: FieldInfo]]
    /// `/package.Service/Method` → method.
    package let methods: [String: Method]

    /// Reads a serialized FileDescriptorSet; `source` names it in errors.
    package init(fileDescriptorSet data: Data, source: String) throws {
        let set: Google_Protobuf_FileDescriptorSet
        do {
            set = try Google_Protobuf_FileDescriptorSet(serializedBytes: data)
        } catch {
            throw ChaosError.badInput("\(source): not a FileDescriptorSet (protoc --include_imports -o FILE …): \(error)")
        }
        guard !set.file.isEmpty else { throw ChaosError.badInput("\(source): a FileDescriptorSet with no files") }
        var messages: [String: [String: FieldInfo]] = [:]
        var methods: [String: Method] = [:]
        func add(_ message: Google_Protobuf_DescriptorProto, prefix: String) {
            let name = prefix + message.name
            messages[name] = Dictionary(
                message.field.map { field in
                    (field.name, FieldInfo(number: UInt64(field.number), type: field.type, messageType: Self.trim(field.typeName)))
                },
                uniquingKeysWith: { first, _ in first }
            )
            for nested in message.nestedType { add(nested, prefix: name + ".") }
        }
        for file in set.file {
            let package = file.package.isEmpty ? "" : file.package + "."
            for message in file.messageType { add(message, prefix: package) }
            for service in file.service {
                for method in service.method {
                    let path = "/\(package)\(service.name)/\(method.name)"
                    methods[path] = Method(path: path, input: Self.trim(method.inputType), output: Self.trim(method.outputType))
                }
            }
        }
        self.messages = messages
        self.methods = methods
    }

    /// The largest descriptor set read (a real one is kilobytes; this keeps `/dev/zero` or a wrong file from
    /// being read whole).
    package static let largestFile = 64 << 20

    /// Reads a FileDescriptorSet file: a regular file of at most ``largestFile`` bytes.
    package static func load(path: String) throws -> ProtobufSchema {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        guard let attributes else { throw ChaosError.badInput("cannot read the descriptor set '\(path)'") }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw ChaosError.badInput("the descriptor set '\(path)' is not a regular file")
        }
        guard (attributes[.size] as? NSNumber)?.intValue ?? 0 <= largestFile else {
            throw ChaosError.badInput("the descriptor set '\(path)' is over \(largestFile >> 20) MiB: not a FileDescriptorSet")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChaosError.badInput("cannot read the descriptor set '\(path)'")
        }
        return try ProtobufSchema(fileDescriptorSet: data, source: path)
    }

    /// Whether a message of that full name is described.
    package func hasMessage(_ name: String) -> Bool { messages[name] != nil }

    /// A field given as a dotted name (`sequence_id`, `meta.seq`) or a field-number path (`2`, `4.2`) in message
    /// `type`; the error names the message's fields when there is no such field.
    package func field(_ name: String, in type: String) throws -> Field {
        if let numbers = ProtocolSpec.fieldNumberPath(name) { return Field(path: numbers, zigzag: false, isText: false) }
        var current = type
        var path: [UInt64] = []
        let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        for (index, part) in parts.enumerated() {
            guard let fields = messages[current] else { throw ChaosError.badInput("no message '\(current)' in the descriptor set") }
            guard let field = fields[part] else {
                throw ChaosError.badInput("no field '\(part)' in \(current); its fields are: \(fields.keys.sorted().joined(separator: ", "))")
            }
            path.append(field.number)
            if index == parts.count - 1 {
                return Field(
                    path: path,
                    zigzag: field.type == .sint32 || field.type == .sint64,
                    isText: field.type == .string || field.type == .bytes
                )
            }
            guard field.type == .message else { throw ChaosError.badInput("\(current).\(part) is not a message, so '\(name)' goes nowhere") }
            current = field.messageType
        }
        throw ChaosError.badInput("an empty field name")
    }

    /// Why `name` names no field of any of `methods`' requests (`direction` upstream) or responses (downstream), or
    /// nil when one of them has it.
    package func unresolved(_ name: String, direction: Direction, methods: [Method]) -> String? {
        let role = direction == .upstream ? "request" : "response"
        var first: String?
        for method in methods {
            let type = direction == .upstream ? method.input : method.output
            do {
                _ = try field(name, in: type)
                return nil
            } catch let error as ChaosError {
                if first == nil { first = "'\(name)' in the \(role) of \(method.path) (\(type)): \(error.message)" }
            } catch {
                if first == nil { first = "'\(name)': \(error)" }
            }
        }
        guard let first else { return "'\(name)': no RPC to look for it in" }
        return methods.count == 1 ? first : first + " (nor in the \(role) of any other audited RPC)"
    }

    private static func trim(_ typeName: String) -> String {
        typeName.hasPrefix(".") ? String(typeName.dropFirst()) : typeName
    }
}

/// What the scenario reader and the audit ask of a descriptor set (`protocol.descriptors`): its RPCs, and each RPC's
/// request (upstream) and response (downstream) fields by name.
extension ProtobufSchema: MessageSchema {
    package var calls: [String] { methods.keys.sorted() }

    package func unresolved(_ name: String, direction: Direction, calls: [String]) -> String? {
        unresolved(name, direction: direction, methods: calls.compactMap { methods[$0] })
    }

    package func numbered(_ resolved: ProtocolSpec, call: String, direction: Direction) throws -> (spec: ProtocolSpec, zigzag: Set<String>) {
        guard let method = methods[call] else { throw ChaosError.badInput("no RPC \(call) in the descriptor set") }
        let type = direction == .upstream ? method.input : method.output
        var resolved = resolved
        var zigzag: Set<String> = []
        func number(_ name: String) throws -> String {
            let field = try field(name, in: type)
            let text = field.path.map(String.init).joined(separator: ".")
            if field.zigzag { zigzag.insert(text) }
            return text
        }
        resolved.seq = try number(resolved.seq)
        resolved.ack = try resolved.ack.map(number)
        if case .field(let name)? = resolved.streamSource { resolved.stream = try number(name) }
        var ignore: [String: [String]] = [:]
        for (field, values) in resolved.ignore {
            ignore[try number(field == "type" ? resolved.type : field)] = values
        }
        resolved.ignore = ignore
        resolved.format = .protobuf
        return (resolved, zigzag)
    }
}
