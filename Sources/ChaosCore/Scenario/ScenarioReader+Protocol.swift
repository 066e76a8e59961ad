import Foundation

extension ScenarioReader {
    /// `protocol:`: framing, format, where the fields are, per-direction overrides.
    func protocolSpec(_ value: YAMLValue) throws -> ProtocolSpec {
        let map = try value.mapping("protocol", allowed: [
            "framing", "length_bytes", "length_offset", "format", "seq", "stream", "id", "ack", "type", "ignore",
            "regex", "seq_start", "max_message", "upstream", "downstream",
        ])
        var spec = ProtocolSpec()
        let framingName = try map["framing"]?.string("protocol.framing") ?? "lines"
        switch framingName {
        case "lines": spec.framing = .lines
        case "length-prefixed":
            let bytes = try map["length_bytes"].map { Int(try $0.int("protocol.length_bytes", in: 1...4)) } ?? 4
            if bytes == 3, let v = map["length_bytes"] { throw v.error("protocol.length_bytes must be 1, 2 or 4, found 3") }
            let offset = try map["length_offset"].map { Int(try $0.int("protocol.length_offset", in: -8...8)) } ?? 0
            spec.framing = .lengthPrefixed(bytes: bytes, offset: offset)
        case "websocket": spec.framing = .websocket
        case "grpc":
            // `run` could only refuse it later; say so here, where the file is read.
            throw try map.required("framing").error("protocol.framing grpc is not supported by the audit yet; "
                + "use lines, length-prefixed or websocket (or leave protocol out to proxy without auditing)")
        default:
            throw try map.required("framing").error(
                "protocol.framing must be one of lines, length-prefixed, websocket, grpc, found '\(framingName)'")
        }
        spec.format = try map["format"]?.choice("protocol.format", of: ProtocolSpec.Format.self) ?? .json
        if spec.format == .protobuf, let format = map["format"], spec.framing == .lines {
            throw format.error("protocol.format protobuf needs binary messages: framing websocket or length-prefixed")
        }
        spec.seq = try map["seq"]?.string("protocol.seq") ?? "seq"
        spec.stream = try map["stream"].map { try streamKey($0, "protocol.stream", framing: spec.framing) } ?? "stream"
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
        spec.upstream = try map["upstream"].map { try override($0, "protocol.upstream", framing: spec.framing) }
        spec.downstream = try map["downstream"].map { try override($0, "protocol.downstream", framing: spec.framing) }
        return spec
    }

    /// `upstream:` / `downstream:`: seq, stream, ack, type and ignore for one direction.
    private func override(_ value: YAMLValue, _ what: String, framing: ProtocolSpec.Framing) throws
        -> ProtocolSpec.DirectionOverride {
        let map = try value.mapping(what, allowed: ["seq", "stream", "ack", "type", "ignore"])
        var override = ProtocolSpec.DirectionOverride()
        override.seq = try map["seq"].map { try $0.string("\(what).seq") }
        override.stream = try map["stream"].map { try streamKey($0, "\(what).stream", framing: framing) }
        override.ack = try map["ack"].map { try $0.string("\(what).ack") }
        override.type = try map["type"].map { try $0.string("\(what).type") }
        override.ignore = try map["ignore"].map { try ignoreRules($0, "\(what).ignore") }
        return override
    }

    /// A stream key: a field, or `header:NAME` / `query:NAME` of a WebSocket upgrade request.
    private func streamKey(_ value: YAMLValue, _ what: String, framing: ProtocolSpec.Framing) throws -> String {
        let key = try value.string(what)
        for prefix in ["header:", "query:"] where key.hasPrefix(prefix) {
            guard framing == .websocket else {
                throw value.error("\(what) \(key): \(prefix)NAME names a part of the WebSocket upgrade request; it needs framing websocket")
            }
            guard key.count > prefix.count else { throw value.error("\(what) \(key) needs a name after '\(prefix)'") }
        }
        return key
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
