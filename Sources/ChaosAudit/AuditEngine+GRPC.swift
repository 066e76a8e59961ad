import ChaosCore
import ChaosProtocols

extension AuditEngine {
    /// With a descriptor set: per audited RPC, a reader of its request and of its response messages, each with the
    /// scenario's field names resolved in that message type (request and response types differ). A direction whose
    /// type lacks one of the fields has no reader: its messages are not audited (the scenario's reader checked
    /// that every name exists in some RPC).
    static func callReaders(spec: ProtocolSpec, layer: ProtocolLayer) throws -> ([MessageExtractor?], [String: Int]) {
        guard let schema = layer.schema else { return ([], [:]) }
        var readers: [MessageExtractor?] = []
        var index: [String: Int] = [:]
        let methods = (layer.auditedMethods ?? []).sorted().compactMap { schema.methods[$0] }
        guard !methods.isEmpty else { throw ChaosError.badInput("protocol: no audited RPC is in the descriptor set") }
        // A name no audited RPC has would audit nothing, and pass: it is a mistake.
        for direction in [Direction.upstream, .downstream] {
            for name in ProtobufSchema.names(spec, direction) {
                if let problem = schema.unresolved(name, direction: direction, methods: methods) {
                    throw ChaosError.badInput("protocol: \(problem)")
                }
            }
        }
        for path in (layer.auditedMethods ?? []).sorted() {
            guard let method = schema.methods[path] else { continue }
            index[path] = readers.count / 2
            for direction in [Direction.upstream, .downstream] {
                let type = direction == .upstream ? method.input : method.output
                readers.append(try? reader(spec.resolved(for: direction), type: type, schema: schema))
            }
        }
        return (readers, index)
    }

    /// A protobuf reader of message `type` for `resolved`'s fields, named by the schema.
    private static func reader(_ resolved: ProtocolSpec, type: String, schema: ProtobufSchema) throws -> MessageExtractor {
        var resolved = resolved
        var zigzag: Set<String> = []
        func number(_ name: String) throws -> String {
            let field = try schema.field(name, in: type)
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
        return try MessageExtractor(spec: resolved, zigzag: zigzag)
    }

    /// The fields of a gRPC message: read by its RPC's reader (with a descriptor set) or the direction's.
    @inline(__always)
    func extract(_ frame: UnsafeBufferPointer<UInt8>, of call: GRPCCall, slot: Int) -> MessageFields {
        guard !callReaders.isEmpty else { return extract(frame, slot: slot) }
        if call.readerIndex == nil { call.readerIndex = callReaderIndex[call.path] ?? -1 }
        guard let reader = call.readerIndex, reader >= 0, callReaders[reader * 2 + slot] != nil else {
            var fields = MessageFields()
            fields.ignored = true
            return fields
        }
        return callReaders[reader * 2 + slot]!.extract(frame)
    }

    /// The stream a gRPC call's messages belong to when it is not a field: a request metadata header
    /// (`header:NAME`), or the call itself (`rpc`: `/package.Service/Method #connection.stream`).
    @inline(__always)
    func streamName(of call: GRPCCall, slot: Int, connection: ConnectionState) -> [UInt8]? {
        if call.streamNamed[slot] { return call.streamNames[slot] }
        let name: String? =
            switch handshakeStreamSources[slot] {
            case .header(let header): call.header(header)
            case .rpc: "\(call.path) #\(connection.id).\(call.streamID)"
            case .query, .field, nil: nil
            }
        call.streamNames[slot] = name.map { Array($0.utf8) }
        call.streamNamed[slot] = true
        return call.streamNames[slot]
    }
}
