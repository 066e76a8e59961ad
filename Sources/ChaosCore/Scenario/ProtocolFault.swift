/// The parameters of a fault that a protocol plug-in declares (`NAME key=value key=value`): its kind
/// and its fields, in the order its ``ProtocolFaultDeclaration`` lists them. ChaosCore reads, checks, draws, saves and
/// replays it without knowing what it does; the plug-in that declares it makes its frames.
///
/// Saved as the core faults are, under its kind's name in lower camel case: `{"wsClose": {"code": 1012, "grace":
/// "2s", "side": "client"}}`.
package struct ProtocolFault: Sendable, Equatable {
    /// A field's value: a whole number, or text (a choice, or a duration as written: `2s`).
    package enum Value: Sendable, Equatable, CustomStringConvertible, ExpressibleByIntegerLiteral, ExpressibleByStringLiteral {
        case integer(Int64)
        case text(String)

        package init(integerLiteral value: Int64) { self = .integer(value) }
        package init(stringLiteral value: String) { self = .text(value) }

        package var description: String {
            switch self {
            case .integer(let number): "\(number)"
            case .text(let text): text
            }
        }
    }

    /// One field: its scenario key and value.
    package struct Field: Sendable, Equatable {
        package var key: String
        package var value: Value

        /// A field.
        package init(_ key: String, _ value: Value) {
            self.key = key
            self.value = value
        }
    }

    /// The kind's name, as its declaration gives it.
    package var kind: String
    /// The fields, in the declaration's order.
    package var fields: [Field]

    /// A fault of `kind` with `fields`.
    package init(kind: String, fields: [Field]) {
        self.kind = kind
        self.fields = fields
    }

    /// The value of `key`, when given.
    package subscript(key: String) -> Value? { fields.first { $0.key == key }?.value }

    /// The whole number under `key`, when it is one.
    package func integer(_ key: String) -> Int64? {
        guard case .integer(let number) = self[key] else { return nil }
        return number
    }

    /// The text under `key`, when it is text.
    package func text(_ key: String) -> String? {
        guard case .text(let text) = self[key] else { return nil }
        return text
    }

    /// The duration under `key`, when it is one.
    package func duration(_ key: String) -> ChaosDuration? { text(key).flatMap(ChaosDuration.init(parsing:)) }

    /// The fields as `key=value` pairs, for timelines and reports.
    package var parameters: [(String, String)] { fields.map { ($0.key, $0.value.description) } }

    /// Equal when kind and fields are, in any order (a saved fault's fields come back in the file's order).
    package static func == (lhs: ProtocolFault, rhs: ProtocolFault) -> Bool {
        lhs.kind == rhs.kind && lhs.fields.count == rhs.fields.count && lhs.fields.allSatisfy { rhs[$0.key] == $0.value }
    }

    /// The kind a saved fault's key names when no catalog says (`aB` → `a-b`): kinds are written with hyphens.
    package static func kind(codingKey: String) -> String {
        codingKey.reduce(into: "") { name, character in
            if character.isUppercase {
                name += "-" + character.lowercased()
            } else {
                name.append(character)
            }
        }
    }

    /// The key a saved fault goes under: the kind's name in lower camel case (`a-b` → `aB`).
    package static func codingKey(kind: String) -> String {
        let parts = kind.split(whereSeparator: { $0 == "-" || $0 == "_" })
        guard let first = parts.first else { return kind }
        return String(first) + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }
}

extension ProtocolFault: Codable {
    /// Reads a fault saved under its kind's camel-case name (the one key of its object).
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a fault is one kind"))
        }
        try self.init(from: container, key: key, catalog: decoder.userInfo[FramingCatalog.userInfoKey] as? FramingCatalog)
    }

    /// Reads a fault saved under `key` (its kind's camel-case name): the fields come back in the declaration's order
    /// when the decoder carries the plug-ins' catalog (``FramingCatalog/userInfoKey``), in the key's order otherwise.
    init(from container: KeyedDecodingContainer<AnyCodingKey>, key: AnyCodingKey, catalog: FramingCatalog?) throws {
        let body = try container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: key)
        let declaration = catalog?.faultDeclaration(codingKey: key.stringValue)
        kind = declaration?.kind ?? Self.kind(codingKey: key.stringValue)
        let order = declaration?.fields.map(\.key) ?? []
        let keys = body.allKeys.sorted {
            (order.firstIndex(of: $0.stringValue) ?? .max, $0.stringValue) < (order.firstIndex(of: $1.stringValue) ?? .max, $1.stringValue)
        }
        fields = try keys.map { field in
            if let number = try? body.decode(Int64.self, forKey: field) { return Field(field.stringValue, .integer(number)) }
            return Field(field.stringValue, .text(try body.decode(String.self, forKey: field)))
        }
    }

    /// Writes the fault under its kind's camel-case name.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyCodingKey.self)
        var body = container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: AnyCodingKey(Self.codingKey(kind: kind)))
        for field in fields {
            switch field.value {
            case .integer(let number): try body.encode(number, forKey: AnyCodingKey(field.key))
            case .text(let text): try body.encode(text, forKey: AnyCodingKey(field.key))
            }
        }
    }
}

/// A coding key of any name.
package struct AnyCodingKey: CodingKey, Sendable {
    package var stringValue: String
    package var intValue: Int? { nil }

    /// The key `name`.
    package init(_ name: String) { stringValue = name }
    package init?(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { nil }
}
