import ChaosCore
import ChaosProtocols

extension AuditEngine {
    /// With a schema (`descriptors:`): per audited RPC, a reader of its request and of its response messages, each
    /// with the scenario's field names resolved in that message type (request and response types differ). A direction
    /// whose type lacks one of the fields has no reader: its messages are not audited (the scenario's reader checked
    /// that every name exists in some RPC).
    static func callReaders(spec: ProtocolSpec, layer: ProtocolLayer) throws -> ([MessageExtractor?], [String: Int]) {
        guard let schema = layer.schema else { return ([], [:]) }
        var readers: [MessageExtractor?] = []
        var index: [String: Int] = [:]
        let methods = (layer.auditedMethods ?? []).sorted().filter { schema.calls.contains($0) }
        guard !methods.isEmpty else { throw ChaosError.badInput("protocol: no audited RPC is in the descriptor set") }
        // A name no audited RPC has would audit nothing, and pass: it is a mistake.
        for direction in [Direction.upstream, .downstream] {
            for name in spec.fieldNames(direction) {
                if let problem = schema.unresolved(name, direction: direction, calls: methods) {
                    throw ChaosError.badInput("protocol: \(problem)")
                }
            }
        }
        for path in methods {
            index[path] = readers.count / 2
            for direction in [Direction.upstream, .downstream] {
                let numbered = try? schema.numbered(spec.resolved(for: direction), call: path, direction: direction)
                readers.append(try numbered.map { try MessageExtractor(spec: $0.spec, zigzag: $0.zigzag) })
            }
        }
        return (readers, index)
    }

    /// The fields of a call's message: read by its RPC's reader (with a schema) or the direction's.
    @inline(__always)
    func extract(_ frame: UnsafeBufferPointer<UInt8>, of call: RPCCall, slot: Int) -> MessageFields {
        guard !callReaders.isEmpty else { return extract(frame, slot: slot) }
        if call.readerIndex == nil { call.readerIndex = callReaderIndex[call.path] ?? -1 }
        guard let reader = call.readerIndex, reader >= 0, callReaders[reader * 2 + slot] != nil else {
            var fields = MessageFields()
            fields.ignored = true
            return fields
        }
        return callReaders[reader * 2 + slot]!.extract(frame)
    }

    /// The stream a call's messages belong to when it is not a field: a request metadata header (`header:NAME`), or
    /// the call itself (`rpc`: `/package.Service/Method #connection.stream`).
    @inline(__always)
    func streamName(of call: RPCCall, slot: Int, connection: ConnectionState) -> [UInt8]? {
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
