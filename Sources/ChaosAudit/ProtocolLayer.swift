import ChaosCore
import ChaosProtocols

/// The protocol layer between traffic events and the message extractor: the scenario's protocol plug-in (from
/// ``ProtocolRegistry``) makes a session per connection, and the session the decoders of its four legs (read
/// from / written to × upstream / downstream).
struct ProtocolLayer {
    let framer: any ProtocolFramer
    /// The largest message a leg buffers.
    let cap: Int
    /// gRPC: the descriptor set that names fields (`descriptors:`).
    let schema: ProtobufSchema?
    /// gRPC: the RPCs audited (`methods:`, and with descriptors only those it describes); nil: every RPC.
    let auditedMethods: Set<String>?
    /// The bytes written to a consumer are the bytes read from its producer (``ProtocolFramer/proxyWritesOnlyRelayedBytes``).
    let writtenCopiesRead: Bool
    /// Where a message's fields are in the messages the decoders hand over (``ProtocolPlugin/fieldSpec(_:)``).
    let fieldSpec: ProtocolSpec

    /// The layer for `spec`; throws `ChaosError.badInput` for a framing the audit cannot read.
    init(spec: ProtocolSpec) throws {
        cap = spec.messageCap
        schema = try spec.descriptors.map { try ProtobufSchema.load(path: $0) }
        var methods = spec.methods.map(Set.init)
        if let schema { methods = (methods ?? Set(schema.methods.keys)).intersection(schema.methods.keys) }
        auditedMethods = methods
        let plugin = try ProtocolRegistry.plugin(reading: spec.framing)
        framer = try plugin.framer(spec, auditedMethods: methods)
        fieldSpec = plugin.fieldSpec(spec)
        writtenCopiesRead = framer.proxyWritesOnlyRelayedBytes
    }
}
