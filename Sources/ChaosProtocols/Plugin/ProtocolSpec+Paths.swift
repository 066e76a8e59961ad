package import ChaosCore

extension ProtocolSpec {
    /// Every field path the spec names (seq, stream, id, ack, type, ignore keys, and the per-direction overrides'), for a
    /// plug-in that hands messages over in a shape of its own to see which of its fields a scenario reads.
    package var fieldPaths: [String] {
        let overrides = [upstream, downstream].compactMap { $0 }
        return [seq, stream, id, ack, type].compactMap { $0 } + ignore.keys
            + overrides.flatMap { [$0.seq, $0.stream, $0.ack, $0.type].compactMap { $0 } + ($0.ignore?.keys.map { $0 } ?? []) }
    }

    /// A path as a scenario writes it, read in the `data` of an envelope (`{…,"data":{…}}`): `data` itself,
    /// `data.KEY` (`data.meta.seq` is `/data/meta/seq`), a pointer (`/seq`) or a bare key in the data.
    package static func envelopeDataPath(_ path: String) -> String {
        if path == "data" { return "/data" }
        if path.hasPrefix("data.") {
            return "/data/" + path.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false).joined(separator: "/")
        }
        return path.hasPrefix("/") ? "/data" + path : "/data/" + path
    }

    /// The spec with every field path rewritten by `path` (``ProtocolPlugin/fieldSpec(_:)`` of a plug-in whose
    /// messages are envelopes: SSE's events, MQTT's PUBLISH packets).
    package func rewritingPaths(_ path: (String) -> String) -> ProtocolSpec {
        var fields = self
        fields.seq = path(seq)
        fields.stream = stream.map(path)
        fields.id = id.map(path)
        fields.ack = ack.map(path)
        fields.type = path(type)
        fields.fanout?.resume = fanout?.resume.map(path)
        fields.ignore = Dictionary(ignore.map { (path($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
        for keyPath in [\ProtocolSpec.upstream, \ProtocolSpec.downstream] {
            guard var override = self[keyPath: keyPath] else { continue }
            override.seq = override.seq.map(path)
            override.stream = override.stream.map(path)
            override.ack = override.ack.map(path)
            override.type = override.type.map(path)
            override.ignore = override.ignore.map { ignore in
                Dictionary(ignore.map { (path($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
            }
            fields[keyPath: keyPath] = override
        }
        return fields
    }
}
