extension ProtocolSpec {
    /// How messages are delimited: a framing's name (one of a ``FramingCatalog``'s) and its numeric options
    /// (`length-prefixed`: `bytes`, `offset`). ChaosCore keeps it as data; the plug-in of that name reads it.
    ///
    /// Written to `scenario.json` as `{"<camelCaseName>": {<options>}}` (`{"lines":{}}`,
    /// `{"lengthPrefixed":{"bytes":4,"offset":0}}`), as run folders have always had it.
    package struct Framing: Sendable, Equatable, Hashable, CustomStringConvertible {
        /// The canonical framing name (`lines`, `length-prefixed`, a plug-in's own).
        package var name: String
        /// The framing's own options, as its plug-in stores them.
        package var options: [String: Int]

        /// A framing.
        package init(name: String, options: [String: Int] = [:]) {
            self.name = name
            self.options = options
        }

        /// `lines`, or `length-prefixed(bytes: 2, offset: 0)`.
        package var description: String {
            options.isEmpty ? name : "\(name)(\(options.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")))"
        }
    }
}

extension ProtocolSpec.Framing: Codable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// `{"lengthPrefixed": {"bytes": 4, "offset": 0}}`.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "a framing is one key, its name, like {\"lines\": {}}"
                )
            )
        }
        self.init(
            name: Self.name(fromCodingKey: key.stringValue),
            options: try container.decode([String: Int].self, forKey: key)
        )
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(options, forKey: Key(stringValue: Self.codingKey(name)))
    }

    /// `length-prefixed` → `lengthPrefixed`.
    static func codingKey(_ name: String) -> String {
        let parts = name.split(separator: "-", omittingEmptySubsequences: false)
        return parts.enumerated().map { $0.offset == 0 ? String($0.element) : $0.element.prefix(1).uppercased() + $0.element.dropFirst() }
            .joined()
    }

    /// `lengthPrefixed` → `length-prefixed`.
    static func name(fromCodingKey key: String) -> String {
        key.reduce(into: "") { name, character in
            if character.isUppercase { name += "-" + character.lowercased() } else { name.append(character) }
        }
    }
}
