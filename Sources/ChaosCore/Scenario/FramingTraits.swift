/// What the scenario reader and the invariants need to know of one framing. ChaosCore knows no framing by name:
/// the protocol plug-ins (ChaosProtocols) give these facts, and a ``FramingCatalog`` of them is handed to
/// ``Scenario/parse(yaml:file:framings:)`` and the invariants.
package protocol FramingTraits: Sendable {
    /// The names `protocol.framing` accepts (the first is the canonical one).
    static var names: [String] { get }
    /// The option keys a scenario may give this framing beside `framing:` (`length_bytes`, `length_offset`).
    static var optionKeys: [String] { get }
    /// The framing `options` (numbers by scenario key) make, with defaults filled in; throws
    /// ``FramingOptionProblem`` for a key it does not take or a value out of range.
    static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing
    /// Checks a framing however it arrived (a scenario, `scenario.json`, flags); throws ``FramingOptionProblem``.
    static func check(_ framing: ProtocolSpec.Framing) throws
    /// The message format when none is given (`protobuf` for a framing of RPCs).
    static var defaultFormat: ProtocolSpec.Format { get }
    /// The stream key when none is given (`rpc` for a framing of RPCs: each call is a stream).
    static var defaultStream: String { get }
    /// Whether its messages belong to RPCs (`descriptors`, `methods` and the `rpc` stream key are for it).
    static var hasRPCs: Bool { get }
    /// The schema `protocol.descriptors` names (a framing with RPCs reads one); throws `ChaosError.badInput` for a
    /// file it cannot read, or when it reads none.
    static func loadSchema(path: String) throws -> any MessageSchema
    /// Whether its messages are binary (`format: protobuf` needs it).
    static var carriesBinary: Bool { get }
    /// The stream-key prefixes it gives a meaning (`header:` of a request or call metadata, `query:` of a request).
    static var streamKeyPrefixes: [String] { get }
    /// The name of the frames the proxy follows for this protocol's faults (what `chaos proxy
    /// --frames` takes); nil: the proxy never follows its frames.
    static var frames: String? { get }
    /// The faults of its own: each needs the proxy to follow its frames.
    static var faults: [ProtocolFaultDeclaration] { get }
    /// The list options it takes beside `framing:` (`topics`: the topic filters audited), each a name or a list of names.
    static var listOptionKeys: [String] { get }
    /// What is wrong with `item` of list option `key` (nil: nothing), after `protocol.KEY: 'ITEM' `.
    static func listOptionProblem(_ key: String, _ item: String) -> String?
    /// Whether it reads messages by the boundaries of UDP datagrams (only `udp://` proxies keep them).
    static var readsDatagrams: Bool { get }
    /// Whether it reads the streams of QUIC connections only (HTTP/3): `protocol.transport: quic` is then required.
    static var readsQUICStreams: Bool { get }
}

extension FramingTraits {
    /// The canonical framing name.
    package static var name: String { names[0] }
    package static var optionKeys: [String] { [] }
    package static var defaultFormat: ProtocolSpec.Format { .json }
    package static var defaultStream: String { "stream" }
    package static var hasRPCs: Bool { false }
    package static func loadSchema(path: String) throws -> any MessageSchema {
        throw ChaosError.badInput("framing \(name) reads no descriptor set")
    }
    package static var carriesBinary: Bool { true }
    package static var streamKeyPrefixes: [String] { [] }
    package static var frames: String? { nil }
    package static var faults: [ProtocolFaultDeclaration] { [] }
    package static var listOptionKeys: [String] { [] }
    package static func listOptionProblem(_ key: String, _ item: String) -> String? { nil }
    package static var readsDatagrams: Bool { false }
    package static var readsQUICStreams: Bool { false }

    /// A framing with no options of its own: `options` must be empty.
    package static func framing(options: [String: Int]) throws -> ProtocolSpec.Framing {
        let framing = ProtocolSpec.Framing(name: name, options: options)
        try check(framing)
        return framing
    }

    /// A framing with no options of its own has none.
    package static func check(_ framing: ProtocolSpec.Framing) throws {
        if let key = framing.options.keys.sorted().first { throw FramingOptionProblem(key, "is not an option of framing \(name)") }
    }
}

/// A framing option that is not taken or is out of range: `key` as a scenario names it, and what is wrong with it.
package struct FramingOptionProblem: Error, Sendable, Equatable {
    /// The option key (`length_bytes`).
    package var key: String
    /// What is wrong, after the key (`must be 1, 2 or 4, found 3`).
    package var problem: String

    /// A problem with `key`.
    package init(_ key: String, _ problem: String) {
        self.key = key
        self.problem = problem
    }

    /// The message as a scenario names the key (`protocol.length_bytes must be 1, 2 or 4, found 3`).
    package var message: String { "protocol.\(key) \(problem)" }
}

/// The framings a scenario may name, with their facts: the protocol plug-ins' registry makes it.
package struct FramingCatalog: Sendable {
    /// The framings, in the order their names are listed in messages.
    package let framings: [any FramingTraits.Type]

    /// A catalog of `framings`.
    package init(_ framings: [any FramingTraits.Type]) { self.framings = framings }

    /// The framing that `name` (a `protocol.framing` value) names.
    package func traits(named name: String) -> (any FramingTraits.Type)? { framings.first { $0.names.contains(name) } }

    /// The canonical framing names (`lines, length-prefixed, …`).
    package var names: [String] { framings.map { $0.name } }

    /// Every option key some framing takes.
    package var optionKeys: [String] { framings.flatMap { $0.optionKeys } }
    /// Every list option key of any framing.
    package var listOptionKeys: [String] { framings.flatMap { $0.listOptionKeys } }

    /// What a stream key with `prefix` names, and the framings that give it that meaning, for messages:
    /// `header:NAME names a header of the request or call that opened the stream; it needs framing A, B or C`.
    package func streamKeyMeaning(_ prefix: String) -> String {
        let part = prefix == "query:" ? "a query parameter of the request" : "a header of the request or call"
        return "\(prefix)NAME names \(part) that opened the stream; it needs framing "
            + Self.list(framings.filter { $0.streamKeyPrefixes.contains(prefix) }.map { $0.name })
    }

    /// `a`, `a or b`, `a, b or c`.
    static func list(_ names: [String]) -> String {
        names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names[names.count - 1]
    }

    /// The declaration of the plug-in fault named `kind`, with the framing that declares it.
    package func fault(named kind: String) -> (declaration: ProtocolFaultDeclaration, framing: any FramingTraits.Type)? {
        for framing in framings {
            if let declaration = framing.faults.first(where: { $0.kind == kind }) { return (declaration, framing) }
        }
        return nil
    }

    /// The declaration of the plug-in fault saved under `codingKey` (`wsClose`).
    package func faultDeclaration(codingKey: String) -> ProtocolFaultDeclaration? {
        for framing in framings {
            if let declaration = framing.faults.first(where: { ProtocolFault.codingKey(kind: $0.kind) == codingKey }) { return declaration }
        }
        return nil
    }

    /// The names of every plug-in's faults, in registry order.
    package var faultKinds: [String] { framings.flatMap { framing in framing.faults.map { $0.kind } } }

    /// The frame names the proxy can follow, in registry order.
    package var frameNames: [String] { framings.compactMap { $0.frames } }

    /// The framing whose frames are named `frames`.
    package func framing(following frames: String) -> (any FramingTraits.Type)? { framings.first { $0.frames == frames } }

    /// The key under which a decoder's `userInfo` carries the catalog, so that a saved plug-in fault's fields come
    /// back in its declaration's order.
    package static let userInfoKey = CodingUserInfoKey(rawValue: "chaos.framingCatalog")!

    /// The canonical names of the framings with RPCs, for messages.
    package var namesWithRPCs: String { Self.list(framings.filter { $0.hasRPCs }.map { $0.name }) }

    /// The canonical names of the framings with binary messages, for messages.
    package var namesCarryingBinary: String { Self.list(framings.filter { $0.carriesBinary }.map { $0.name }) }
}
