import Foundation

extension ScenarioReader {
    /// `protocol:`: framing, format, where the fields are, per-direction overrides.
    func protocolSpec(_ value: YAMLValue) throws -> ProtocolSpec {
        let map = try value.mapping(
            "protocol",
            allowed: [
                "framing", "format", "seq", "stream", "id", "ack", "type", "ignore",
                "regex", "seq_start", "max_message", "upstream", "downstream", "descriptors", "methods", "keylog",
                "fanout", "transport",
            ] + framings.optionKeys + framings.listOptionKeys
        )
        var spec = ProtocolSpec()
        let framingName = try map["framing"]?.string("protocol.framing") ?? spec.framing.name
        guard let traits = framings.traits(named: framingName) else {
            throw try map.required("framing").error(
                "protocol.framing must be one of \(framings.names.joined(separator: ", ")), found '\(framingName)'"
            )
        }
        spec.framing = try framing(traits, map, at: value)
        spec.format = try map["format"]?.choice("protocol.format", of: ProtocolSpec.Format.self) ?? traits.defaultFormat
        if spec.format == .protobuf, let format = map["format"], !traits.carriesBinary {
            throw format.error("protocol.format protobuf needs binary messages: framing \(framings.namesCarryingBinary)")
        }
        spec.seq = try map["seq"]?.string("protocol.seq") ?? "seq"
        // A framing with RPCs: each call is a stream unless a field or a metadata header names one that outlives calls.
        spec.stream = try map["stream"].map { try streamKey($0, "protocol.stream", traits) } ?? traits.defaultStream
        spec.id = try map["id"].map { try $0.string("protocol.id") }
        spec.ack = try map["ack"].map { try $0.string("protocol.ack") }
        spec.type = try map["type"]?.string("protocol.type") ?? "type"
        spec.seqStart = try map["seq_start"].map { try $0.int("protocol.seq_start", in: 0...Int64(Int32.max)) } ?? 1
        if let capValue = map["max_message"] {
            let text = try capValue.string("protocol.max_message")
            guard let bytes = ByteSize.parse(text), ProtocolSpec.messageCapRange.contains(Int(clamping: bytes)) else {
                throw capValue.error("protocol.max_message must be a size from 1KB to 1GB like 16MB, found '\(text)'")
            }
            spec.maxMessage = Int(bytes)
        }
        if let regexValue = map["regex"] {
            let pattern = try regexValue.string("protocol.regex")
            do { _ = try NSRegularExpression(pattern: pattern) } catch {
                throw regexValue.error("protocol.regex is not a valid regular expression: \(pattern)")
            }
            spec.regex = pattern
        }
        if spec.format == .text, spec.regex == nil { throw value.error("protocol.format text needs protocol.regex") }
        if let ignoreValue = map["ignore"] { spec.ignore = try ignoreRules(ignoreValue, "protocol.ignore") }
        spec.upstream = try map["upstream"].map { try override($0, "protocol.upstream", traits) }
        spec.downstream = try map["downstream"].map { try override($0, "protocol.downstream", traits) }
        for key in ["descriptors", "methods"] where !traits.hasRPCs {
            if let value = map[key] { throw value.error("protocol.\(key) is for framing \(framings.namesWithRPCs)") }
        }
        if let methodsValue = map["methods"] {
            let items = methodsValue.isSequence ? try methodsValue.sequence("protocol.methods") : [methodsValue]
            spec.methods = try items.map { item in
                let path = try item.string("protocol.methods")
                guard ProtocolSpec.isMethodPath(path) else {
                    throw item.error("protocol.methods: '\(path)' is not an RPC path like /package.Service/Method")
                }
                return path
            }
        }
        spec.lists = try listOptions(traits, map)
        if let fanoutValue = map["fanout"] { try readFanout(fanoutValue, traits, into: &spec, map: map) }
        if let descriptorsValue = map["descriptors"] {
            try readDescriptors(descriptorsValue, traits, into: &spec, map: map)
        }
        if let keylogValue = map["keylog"] {
            let items = keylogValue.isSequence ? try keylogValue.sequence("protocol.keylog") : [keylogValue]
            spec.keylog = try items.map { item in
                // Read by `chaos audit`, not now: a run's own keys.log exists only once the run has been.
                let given = try item.string("protocol.keylog")
                guard !given.isEmpty else { throw item.error("protocol.keylog must name an NSS key log file") }
                return given.hasPrefix("/")
                    ? given
                    : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(given).standardizedFileURL.path
            }
        }
        if let transportValue = map["transport"] {
            spec.transport = try transportValue.choice("protocol.transport", of: ProtocolSpec.Transport.self)
            guard spec.keylog != nil else {
                throw transportValue.error("protocol.transport quic needs protocol.keylog: the NSS key log the pair's QUIC stack writes")
            }
            if traits.readsDatagrams {
                throw transportValue.error("protocol.transport quic reads QUIC streams; framing \(framingName) reads whole datagrams")
            }
        }
        if traits.readsQUICStreams, spec.transport != .quic {
            throw try map.required("framing").error(
                "protocol.framing \(framingName) reads HTTP/3 on QUIC streams: it needs protocol.transport: quic, with protocol.keylog and a udp:// proxy"
            )
        }
        try checkNumberPaths(spec, map: map, at: value)
        return spec
    }

    /// `descriptors:` a FileDescriptorSet, relative to the scenario's folder: read now, so that every field name
    /// and method is checked against it here, with the line and column of the name.
    private func readDescriptors(
        _ value: YAMLValue,
        _ traits: any FramingTraits.Type,
        into spec: inout ProtocolSpec,
        map: YAMLMapping
    ) throws {
        let given = try value.string("protocol.descriptors")
        let path =
            given.hasPrefix("/")
            ? given
            : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(given).standardizedFileURL.path
        let schema: any MessageSchema
        do { schema = try traits.loadSchema(path: path) } catch let error as ChaosError {
            throw value.error("protocol.descriptors: \(error.message)")
        }
        spec.descriptors = path
        guard spec.format == .protobuf else {
            throw value.error("protocol.descriptors names protobuf fields; it needs format protobuf")
        }
        if let methods = spec.methods, let values = try map["methods"].map({ $0.isSequence ? try $0.sequence("protocol.methods") : [$0] }) {
            for (method, item) in zip(methods, values) where !schema.calls.contains(method) {
                throw item.error("protocol.methods: no RPC \(method) in \(given); it has \(schema.calls.joined(separator: ", "))")
            }
        }
        let methods = (spec.methods ?? schema.calls).filter { schema.calls.contains($0) }
        guard !methods.isEmpty else { throw value.error("protocol.descriptors: \(given) describes no RPC") }
        // Each name, where it was written, against the request (upstream) or response (downstream) type of each RPC:
        // an RPC whose messages lack a field is not audited that way, but a name no RPC has is a mistake.
        for direction in Direction.allCases {
            for (name, at) in try fieldNames(spec, direction, map: map) {
                if let problem = schema.unresolved(name, direction: direction, calls: methods) {
                    throw (at ?? value).error("protocol: \(problem)")
                }
            }
        }
    }

    /// `format: protobuf` without descriptors: the fields each direction reads are number paths. Only what a
    /// direction uses is checked (a shared `seq` both `upstream:` and `downstream:` override is never read).
    private func checkNumberPaths(_ spec: ProtocolSpec, map: YAMLMapping, at value: YAMLValue) throws {
        guard spec.format == .protobuf, spec.descriptors == nil else { return }
        for direction in Direction.allCases {
            for (name, at) in try fieldNames(spec, direction, map: map) where !name.isEmpty && !ProtocolSpec.isFieldNumberPath(name) {
                throw (at ?? value).error(
                    "protocol.format protobuf reads fields by number path (2, or 4.1 for a nested "
                        + "field), found '\(name)' (read \(direction)\(at == nil ? ", a default: give it in protocol.\(direction)" : ""))"
                )
            }
        }
    }

    /// The field names `direction` reads, each with where it was written (its override, else the shared key;
    /// nil: a default nobody wrote).
    private func fieldNames(_ spec: ProtocolSpec, _ direction: Direction, map: YAMLMapping) throws -> [(String, YAMLValue?)] {
        let resolved = spec.resolved(for: direction)
        let overrides = try map[direction.rawValue].map { try $0.mapping("protocol.\(direction.rawValue)", allowed: nil) }
        func position(_ key: String) -> YAMLValue? { overrides?[key] ?? map[key] }
        var names: [(String, YAMLValue?)] = [(resolved.seq, position("seq"))]
        if let ack = resolved.ack { names.append((ack, position("ack"))) }
        if case .field(let name)? = resolved.streamSource { names.append((name, position("stream"))) }
        for field in resolved.ignore.keys.sorted() {
            names.append((field == "type" ? resolved.type : field, (field == "type" ? position("type") : nil) ?? position("ignore")))
        }
        return names
    }

    /// `upstream:` / `downstream:`: seq, stream, ack, type and ignore for one direction.
    private func override(
        _ value: YAMLValue,
        _ what: String,
        _ traits: any FramingTraits.Type
    ) throws
        -> ProtocolSpec.DirectionOverride
    {
        let map = try value.mapping(what, allowed: ["seq", "stream", "ack", "type", "ignore"])
        var override = ProtocolSpec.DirectionOverride()
        override.seq = try map["seq"].map { try $0.string("\(what).seq") }
        override.stream = try map["stream"].map { try streamKey($0, "\(what).stream", traits) }
        override.ack = try map["ack"].map { try $0.string("\(what).ack") }
        override.type = try map["type"].map { try $0.string("\(what).type") }
        override.ignore = try map["ignore"].map { try ignoreRules($0, "\(what).ignore") }
        return override
    }

    /// A stream key: a field; `header:NAME` or `query:NAME` where the framing gives the prefix a meaning (a
    /// request's header or query parameter, a call's metadata); `rpc` (each call is a stream).
    private func streamKey(_ value: YAMLValue, _ what: String, _ traits: any FramingTraits.Type) throws -> String {
        let key = try value.string(what)
        for prefix in ["header:", "query:"] where key.hasPrefix(prefix) {
            guard traits.streamKeyPrefixes.contains(prefix) else {
                throw value.error("\(what) \(key): \(framings.streamKeyMeaning(prefix))")
            }
            guard key.count > prefix.count else { throw value.error("\(what) \(key) needs a name after '\(prefix)'") }
        }
        if key == "rpc", !traits.hasRPCs {
            throw value.error("\(what) rpc (each call a stream) needs framing \(framings.namesWithRPCs); a field named rpc is /rpc")
        }
        return key
    }

    /// `fanout: {sender: from, seq: n, receiver: query:user}`: the sender and seq paths name every message's stream and
    /// seq (so `stream:`/`seq:` may not be given too); the receiver a handshake key the framing gives, or the sender
    /// path (a connection's own messages name its client: the default); `resume`, the path of a receiver's resume point
    /// per sender (format json).
    private func readFanout(_ value: YAMLValue, _ traits: any FramingTraits.Type, into spec: inout ProtocolSpec, map: YAMLMapping) throws {
        let fanout = try value.mapping("protocol.fanout", allowed: ["sender", "seq", "receiver", "resume"])
        let sender = try fanout.required("sender").string("protocol.fanout.sender")
        let seq = try fanout.required("seq").string("protocol.fanout.seq")
        for key in ["stream", "seq"] {
            if let given = map[key] {
                throw given.error("protocol.\(key) is named by protocol.fanout (its sender and seq): give one or the other")
            }
        }
        var receiver: String?
        if let receiverValue = fanout["receiver"] {
            let key = try receiverValue.string("protocol.fanout.receiver")
            if let prefix = ["header:", "query:"].first(where: key.hasPrefix) {
                guard traits.streamKeyPrefixes.contains(prefix), key.count > prefix.count else {
                    throw receiverValue.error(
                        "protocol.fanout.receiver '\(key)': \(prefix)NAME needs a framing with a handshake that has one (framing \(traits.name) has \(traits.streamKeyPrefixes.isEmpty ? "none" : traits.streamKeyPrefixes.joined(separator: ", ")))"
                    )
                }
            } else if key != sender {
                throw receiverValue.error(
                    "protocol.fanout.receiver '\(key)' must be header:NAME or query:NAME of the handshake, or the sender's path (\(sender)): a connection's own messages name its client"
                )
            }
            receiver = key
        }
        var resume: String?
        if let resumeValue = fanout["resume"] {
            resume = try resumeValue.string("protocol.fanout.resume")
            guard spec.format == .json else {
                throw resumeValue.error(
                    "protocol.fanout.resume needs format json: it names an object of each sender's highest seq the receiver holds (format is \(spec.format.rawValue))"
                )
            }
        }
        spec.fanout = ProtocolSpec.Fanout(sender: sender, seq: seq, receiver: receiver, resume: resume)
        spec.stream = sender
        spec.seq = seq
    }

    /// The framing's list options (`topics: [fleet/+/position]`), each item checked by the framing where it was written.
    private func listOptions(_ traits: any FramingTraits.Type, _ map: YAMLMapping) throws -> [String: [String]]? {
        var lists: [String: [String]] = [:]
        for key in Set(framings.listOptionKeys).sorted() {
            guard let value = map[key] else { continue }
            guard traits.listOptionKeys.contains(key) else { throw value.error("protocol.\(key) is not an option of framing \(traits.name)") }
            let items = value.isSequence ? try value.sequence("protocol.\(key)") : [value]
            if items.isEmpty { throw value.error("protocol.\(key) must name at least one") }
            lists[key] = try items.map { item in
                let text = try item.string("protocol.\(key)")
                if let problem = traits.listOptionProblem(key, text) { throw item.error("protocol.\(key): '\(text)' \(problem)") }
                return text
            }
        }
        return lists.isEmpty ? nil : lists
    }

    /// The framing's own options (`length_bytes`), each a number, checked by the framing where they were written.
    private func framing(_ traits: any FramingTraits.Type, _ map: YAMLMapping, at value: YAMLValue) throws -> ProtocolSpec.Framing {
        var options: [String: Int] = [:]
        for key in framings.optionKeys {
            guard let value = map[key] else { continue }
            guard traits.optionKeys.contains(key) else { throw value.error("protocol.\(key) is not an option of framing \(traits.name)") }
            options[key] = Int(try value.int("protocol.\(key)", in: Int64(Int32.min)...Int64(Int32.max)))
        }
        do { return try traits.framing(options: options) } catch let problem as FramingOptionProblem {
            throw (map[problem.key] ?? map["framing"] ?? value).error(problem.message)
        }
    }

    /// `ignore: {FIELD: [VALUE, …]}`: any field of the message; a value or a list of values.
    private func ignoreRules(_ value: YAMLValue, _ what: String) throws -> [String: [String]] {
        guard value.isMapping else { throw value.error("\(what) must be a mapping like {type: [PING, PONG]}") }
        var rules: [String: [String]] = [:]
        for entry in try value.mapping(what, allowed: nil).entries {
            if entry.value.isSequence {
                rules[entry.key] = try entry.value.sequence("\(what).\(entry.key)").map { try $0.string("an ignored value") }
            } else {
                rules[entry.key] = [try entry.value.string("\(what).\(entry.key)")]
            }
        }
        return rules
    }
}
