import ChaosCore
import ChaosProtocols

/// The protocol layer between traffic events and the message extractor: the scenario's protocol plug-in (from
/// ``ProtocolRegistry``) makes a session per connection, and the session the decoders of its four legs (read
/// from / written to × upstream / downstream).
struct ProtocolLayer {
    let framer: any ProtocolFramer
    /// The largest message a leg buffers.
    let cap: Int
    /// A framing with RPCs: the schema that names fields (`descriptors:`), read by its plug-in.
    let schema: (any MessageSchema)?
    /// A framing with RPCs: the RPCs audited (`methods:`, and with descriptors only those it describes); nil: every RPC.
    let auditedMethods: Set<String>?
    /// The bytes written to a consumer are the bytes read from its producer (``ProtocolFramer/proxyWritesOnlyRelayedBytes``).
    let writtenCopiesRead: Bool
    /// Reads are held until the next event, to be audited with the write of their own buffer in one pass
    /// (``ProtocolFramer/auditsRelayedReadsOnce``).
    let holdsReads: Bool
    /// Where a message's fields are in the messages the decoders hand over (``ProtocolPlugin/fieldSpec(_:)``).
    let fieldSpec: ProtocolSpec

    /// The layer for `spec`, read by `plugin` (nil: the registry's plug-in of its framing); throws
    /// `ChaosError.badInput` for a framing the audit cannot read.
    init(spec: ProtocolSpec, plugin: (any ProtocolPlugin.Type)? = nil) throws {
        cap = spec.messageCap
        let plugin = try plugin ?? ProtocolRegistry.plugin(reading: spec.framing)
        schema = try spec.descriptors.map { try plugin.loadSchema(path: $0) }
        var methods = spec.methods.map(Set.init)
        if let schema { methods = (methods ?? Set(schema.calls)).intersection(schema.calls) }
        auditedMethods = methods
        framer = try plugin.framer(spec, auditedMethods: methods)
        fieldSpec = plugin.fieldSpec(spec)
        writtenCopiesRead = framer.proxyWritesOnlyRelayedBytes
        holdsReads = writtenCopiesRead || framer.auditsRelayedReadsOnce
    }
}
