/// A fault that a protocol plug-in declares, as it declares its framing options: its name in `faults:`, its fields
/// with their defaults and rules, and what it does. The scenario reader checks a scenario's fault against it (at
/// file:line:column), the invariants check a saved one, and the plug-in that declares it makes its frames.
package struct ProtocolFaultDeclaration: Sendable {
    /// What one field holds.
    package enum FieldRule: Sendable {
        /// A whole number in `range`; when `sendable` is given, only in one of its ranges, which `meaning` names
        /// (`a close code an endpoint may send (1000-1003, 1007-1014, 3000-4999)`).
        case integer(range: ClosedRange<Int64>, default: Int64, sendable: [ClosedRange<Int64>]? = nil, meaning: String)
        /// One of `choices`.
        case choice([String], default: String)
        /// A duration of at least zero.
        case duration(default: ChaosDuration)
    }

    /// One field: its scenario key and rule.
    package struct Field: Sendable {
        package var key: String
        package var rule: FieldRule

        /// A field.
        package init(_ key: String, _ rule: FieldRule) {
            self.key = key
            self.rule = rule
        }

        /// The value when the scenario gives none.
        var defaultValue: ProtocolFault.Value {
            switch rule {
            case .integer(_, let value, _, _): .integer(value)
            case .choice(_, let value): .text(value)
            case .duration(let value): .text("\(value)")
            }
        }

        /// What is wrong with `value` for this field, after the field's name (nil: nothing).
        func problem(_ value: ProtocolFault.Value) -> String? {
            switch (rule, value) {
            case (.integer(let range, _, let sendable, let meaning), .integer(let number)):
                if !range.contains(number) { return "must be from \(range.lowerBound) to \(range.upperBound), found \(number)" }
                if let sendable, !sendable.contains(where: { $0.contains(number) }) { return "must be \(meaning), found \(number)" }
                return nil
            case (.choice(let choices, _), .text(let text)):
                return choices.contains(text) ? nil : "must be one of \(choices.joined(separator: ", ")), found '\(text)'"
            case (.duration, .text(let text)):
                guard let duration = ChaosDuration(parsing: text) else { return "must be a duration like 250ms or 5s, found '\(text)'" }
                if duration.nanoseconds < 0 { return "must not be negative" }
                return duration <= Scenario.longestDuration ? nil : "must be at most 10 years, found \(text)"
            case (.integer, .text(let text)): return "must be a whole number, found '\(text)'"
            case (_, .integer(let number)): return "must be text, found \(number)"
            }
        }
    }

    /// The name in `faults:`.
    package var kind: String
    /// What it does, in a line (for `chaos validate`'s messages and the docs' check).
    package var summary: String
    /// Its fields, in the order timelines and reports show them.
    package var fields: [Field]
    /// Whether it lasts (`for:`, which it then needs) and lies in wait on the connections live when it begins and on
    /// those opened while it lasts, each caught when its plug-in sees what the fault waits for
    /// (``ProtocolPlugin/catches(_:client:)``); otherwise it happens at an instant, to the connections live then.
    package var lasting: Bool

    /// A declaration.
    package init(kind: String, summary: String, fields: [Field], lasting: Bool = false) {
        self.kind = kind
        self.summary = summary
        self.fields = fields
        self.lasting = lasting
    }

    /// The field keys a scenario may give.
    package var keys: [String] { fields.map(\.key) }

    /// The fault with every field at its default.
    package var defaults: ProtocolFault { fault() }

    /// The fault with `values` for their fields (not checked) and the other fields at their defaults.
    package func fault(_ values: [String: ProtocolFault.Value] = [:]) -> ProtocolFault {
        ProtocolFault(kind: kind, fields: fields.map { .init($0.key, values[$0.key] ?? $0.defaultValue) })
    }

    /// What is wrong with a fault of this kind however it arrived (a `scenario.json` a person edited): the field and
    /// the problem (`code must be …`), or nil.
    package func problem(_ fault: ProtocolFault) -> String? {
        for field in fault.fields {
            guard let declared = fields.first(where: { $0.key == field.key }) else {
                return "\(field.key) is not a field of \(kind) (its fields: \(keys.joined(separator: ", ")))"
            }
            if let problem = declared.problem(field.value) { return "\(field.key) \(problem)" }
        }
        for field in fields where fault[field.key] == nil { return "\(field.key) is missing" }
        return nil
    }
}
