package import ChaosProtocols

/// What the protocol layer saw besides messages, as named counters and families of counts by code that the
/// protocol plug-ins declare (``ProtocolPlugin/counters``, ``ProtocolPlugin/counterFamilies``: handshakes,
/// close codes, frames the peers send to end or reset streams, calls and their statuses, heartbeats) and the audit's own
/// (oversized messages, bytes that did not parse). All zero for lines and length-prefixed framing. Every figure
/// counts what the peers sent, as the proxy read it (and the frames the proxy's own faults sent).
///
/// In report.json each counter and family is a key of `protocol_events` (a family's counts per fault under
/// `NAME_by_fault`), the keys written before families existed: a report written then still loads.
package struct ProtocolStats: Sendable, Codable, Equatable {
    /// The audit's own counters, whatever the protocol.
    package static let auditCounters = [
        ProtocolCounter("oversized", "oversized messages"),
        ProtocolCounter("protocolErrors", "protocol errors"),
        ProtocolCounter("tlsFailures", "TLS handshakes failed"),
    ]
    /// Every counter, the plug-ins' then the audit's.
    package static let knownCounters = ProtocolRegistry.counters(shared: auditCounters)
    /// Every family of counts by code.
    package static let knownFamilies = ProtocolRegistry.counterFamilies

    /// Counter name → count (every known counter, 0 when nothing was seen).
    package private(set) var counters: [String: Int64]
    /// Family name → code → count.
    package private(set) var families: [String: [String: Int64]]
    /// Family name → the fault active (or last) when it came (`none` before any fault) → code → count.
    package private(set) var familiesByFault: [String: [String: [String: Int64]]]
    /// PING round trips (a keepalive read from one peer to its ack read from the other), through the proxy and
    /// the answering peer; nil when there were none.
    package var pingRoundTripS: LatencySummary?

    /// All zero.
    package init() {
        counters = Dictionary(uniqueKeysWithValues: Self.knownCounters.map { ($0.name, 0) })
        families = Dictionary(uniqueKeysWithValues: Self.knownFamilies.map { ($0.name, [:]) })
        familiesByFault = families.mapValues { _ in [:] }
    }

    /// Whether nothing was seen.
    package var isEmpty: Bool { self == ProtocolStats() }

    /// The count of counter `name` (0 for one never counted).
    package subscript(counter name: String) -> Int64 {
        get { counters[name] ?? 0 }
        set { counters[name] = newValue }
    }

    /// The counts of family `name` by code.
    package subscript(family name: String) -> [String: Int64] {
        get { families[name] ?? [:] }
        set { families[name] = newValue }
    }

    /// The counts of family `name` by fault, then code.
    package subscript(familyByFault name: String) -> [String: [String: Int64]] {
        get { familiesByFault[name] ?? [:] }
        set { familiesByFault[name] = newValue }
    }

    /// Counts one event of family `name` with `code`, during (or after) `fault`.
    package mutating func count(_ name: String, code: String, fault: String) {
        families[name, default: [:]][code, default: 0] += 1
        familiesByFault[name, default: [:]][fault, default: [:]][code, default: 0] += 1
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Writes every known counter and family (zero and empty ones too), as report.json always had them.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for counter in Self.knownCounters { try container.encode(self[counter: counter.name], forKey: Key(counter.name)) }
        for family in Self.knownFamilies {
            try container.encode(self[family: family.name], forKey: Key(family.name))
            try container.encode(self[familyByFault: family.name], forKey: Key(family.name + "ByFault"))
        }
        try container.encodeIfPresent(pingRoundTripS, forKey: Key("pingRoundTripS"))
    }

    /// Reads the figures; those a report written before they existed lacks are zero.
    package init(from decoder: any Decoder) throws {
        self.init()
        let container = try decoder.container(keyedBy: Key.self)
        for counter in Self.knownCounters {
            counters[counter.name] = try container.decodeIfPresent(Int64.self, forKey: Key(counter.name)) ?? 0
        }
        for family in Self.knownFamilies {
            families[family.name] = try container.decodeIfPresent([String: Int64].self, forKey: Key(family.name)) ?? [:]
            familiesByFault[family.name] =
                try container.decodeIfPresent(
                    [String: [String: Int64]].self,
                    forKey: Key(family.name + "ByFault")
                ) ?? [:]
        }
        pingRoundTripS = try container.decodeIfPresent(LatencySummary.self, forKey: Key("pingRoundTripS"))
    }
}
