/// A schema that a framing with RPCs (``FramingTraits/hasRPCs``) reads from the file `protocol.descriptors` names:
/// it knows the calls and the types of their messages, so that a scenario can name fields (`seq: sequence_id`)
/// where the binary format carries numbers. The framing's plug-in reads it (``FramingTraits/loadSchema(path:)``);
/// the scenario reader and the audit only ask it.
package protocol MessageSchema: Sendable {
    /// The calls it describes, by the name the wire gives them (`/package.Service/Method`), sorted.
    var calls: [String] { get }
    /// Why `name` names no field of `direction`'s messages (requests upstream, responses downstream) in any of
    /// `calls`; nil when one of them has it.
    func unresolved(_ name: String, direction: Direction, calls: [String]) -> String?
    /// `resolved` (one direction's fields) with its field names as the number paths that `call`'s `direction`
    /// messages carry them at, and the paths read as zigzag varints; throws `ChaosError.badInput` when its message
    /// lacks one.
    func numbered(_ resolved: ProtocolSpec, call: String, direction: Direction) throws -> (spec: ProtocolSpec, zigzag: Set<String>)
}

extension ProtocolSpec {
    /// The field names a protocol reads in `direction`'s messages (seq, ack, a stream field, the ignore fields).
    package func fieldNames(_ direction: Direction) -> [String] {
        let resolved = resolved(for: direction)
        var names = [resolved.seq] + (resolved.ack.map { [$0] } ?? [])
        if case .field(let name)? = resolved.streamSource { names.append(name) }
        return names + resolved.ignore.keys.sorted().map { $0 == "type" ? resolved.type : $0 }
    }
}
