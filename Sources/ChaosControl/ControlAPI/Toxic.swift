package import ChaosCore

/// A Toxiproxy toxic as the API shows it: `{"name", "type", "stream", "toxicity", "attributes"}`.
///
/// Each type keeps Toxiproxy's attribute names and units (milliseconds unless said otherwise) and its
/// defaults (every attribute 0, `stream` downstream, `toxicity` 1, `name` `<type>_<stream>`).
package struct Toxic: Codable, Sendable, Equatable {
    /// Unique within its proxy.
    package var name: String
    /// `latency`, `bandwidth`, `slow_close`, `timeout`, `reset_peer`, `slicer` or `limit_data`.
    package var type: String
    /// `upstream` (client to server) or `downstream` (server to client).
    package var stream: String
    /// The probability that it reaches a connection, drawn per connection from the seeded generator.
    package var toxicity: Double
    /// The type's attributes (the others are left out).
    package var attributes: ToxicAttributes

    /// The types chaos maps onto its faults.
    package static let types = ["latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"]

    /// Creates a toxic.
    package init(name: String, type: String, stream: String, toxicity: Double, attributes: ToxicAttributes) {
        self.name = name
        self.type = type
        self.stream = stream
        self.toxicity = toxicity
        self.attributes = attributes.keeping(only: type)
    }

    /// Which way it acts.
    package var direction: Direction { stream == "upstream" ? .upstream : .downstream }

    /// What one connection it reaches gets: one of chaos's faults, in Toxiproxy's units (nil: nothing, as a
    /// bandwidth of 0).
    package var effect: FaultEffect? {
        let a = attributes
        let direction: DirectionSet = self.direction == .upstream ? .upstream : .downstream
        // Clamped, so that no number a client sends can overflow a duration.
        func ms(_ value: Int64?) -> ChaosDuration { .milliseconds(min(max(0, value ?? 0), Int64.max / 1_000_000)) }
        switch type {
        case "latency":
            return .latency(add: ms(a.latency), jitter: ms(a.jitter), direction: direction)
        case "bandwidth":
            // Toxiproxy's KB is 1000 bytes; a rate of 0 or less lets everything through.
            guard let rate = a.rate, rate > 0 else { return nil }
            return .bandwidth(
                rate: ByteRate(bytesPerSecond: rate.multipliedReportingOverflow(by: 1000).overflow ? .max : rate * 1000),
                direction: direction
            )
        case "slicer":
            return .slice(
                maxBytes: Int(clamping: max(1, a.average_size ?? 0)),
                delay: DurationRange(exactly: .microseconds(min(max(0, a.delay ?? 0), Int64.max / 1_000))),
                direction: direction,
                variation: Int(clamping: max(0, a.size_variation ?? 0))
            )
        case "slow_close": return .slowClose(delay: ms(a.delay), direction: direction)
        case "timeout": return .timeout(after: (a.timeout ?? 0) > 0 ? ms(a.timeout) : nil, direction: direction)
        case "reset_peer": return .resetPeer(after: ms(a.timeout), direction: direction)
        case "limit_data": return .limitData(bytes: max(0, a.bytes ?? 0), direction: direction)
        default: return nil
        }
    }

    /// The toxic as a fault occurrence on `proxy`, from now until it is deleted, reaching each connection with
    /// probability `toxicity` drawn from `seed` (nil when it does nothing).
    package func occurrence(proxy: String, seed: UInt64) -> FaultOccurrence? {
        effect.map {
            FaultOccurrence(
                index: 0,
                rule: 0,
                at: .zero,
                lasts: Scenario.longestDuration,
                proxy: proxy,
                targets: .each(toxicity),
                seed: seed,
                effect: $0
            )
        }
    }

    /// `key=value` pairs for the report's fault marks.
    package var summary: String {
        let values = attributes.present.map { "\($0.0)=\($0.1)" }
        return (["stream=\(stream)", "toxicity=\(toxicity)"] + values).joined(separator: " ")
    }
}

/// Every attribute any supported toxic has, all optional: a request may give any subset, an update
/// changes only what it gives, and a toxic shows only its own type's (0 when not given).
package struct ToxicAttributes: Codable, Sendable, Equatable {
    // Toxiproxy's names, so that the synthesized coding keys are its JSON keys.
    package var latency: Int64?
    package var jitter: Int64?
    package var rate: Int64?
    package var delay: Int64?
    package var timeout: Int64?
    package var average_size: Int64?
    package var size_variation: Int64?
    package var bytes: Int64?

    /// No attributes.
    package init() {}

    /// The names each type has.
    static func names(of type: String) -> [WritableKeyPath<ToxicAttributes, Int64?>] {
        switch type {
        case "latency": [\.latency, \.jitter]
        case "bandwidth": [\.rate]
        case "slow_close": [\.delay]
        case "timeout", "reset_peer": [\.timeout]
        case "slicer": [\.average_size, \.size_variation, \.delay]
        case "limit_data": [\.bytes]
        default: []
        }
    }

    /// Only `type`'s attributes, 0 where not given.
    package func keeping(only type: String) -> ToxicAttributes {
        var kept = ToxicAttributes()
        for path in Self.names(of: type) { kept[keyPath: path] = self[keyPath: path] ?? 0 }
        return kept
    }

    /// These attributes with `update`'s given values over them.
    package func updated(with update: ToxicAttributes) -> ToxicAttributes {
        var merged = self
        for path in Self.names(of: "latency") + Self.names(of: "slicer") + [\.rate, \.timeout, \.bytes] {
            if let value = update[keyPath: path] { merged[keyPath: path] = value }
        }
        return merged
    }

    var present: [(String, Int64)] {
        [
            ("latency", latency), ("jitter", jitter), ("rate", rate), ("delay", delay), ("timeout", timeout),
            ("average_size", average_size), ("size_variation", size_variation), ("bytes", bytes),
        ]
        .compactMap { name, value in value.map { (name, $0) } }
    }
}
