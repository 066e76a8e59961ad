import ChaosCore
import ChaosProxy
import Foundation
import NIOHTTP1
import Synchronization

/// `GET /metrics`: the proxies' counters in Prometheus's text format (version 0.0.4), read live: bytes are
/// counted as they are relayed, not when a connection closes.
extension ControlAPI {
    func metrics() -> APIResponse {
        let (proxies, faults) = state.withLock { state in
            (state.order.compactMap { state.proxies[$0] }, state.faults.values.map(\.rule))
        }
        var text = MetricsText()
        text.family("chaos_connections_opened_total", "counter", "Connections opened (both legs up).") {
            proxies.map { ($0.labels, $0.server.counters.opened) }
        }
        text.family("chaos_connections_live", "gauge", "Connections open now.") {
            proxies.map { ($0.labels, Int64($0.server.liveConnections.count)) }
        }
        text.family("chaos_connections_cut_total", "counter", "Connections cut by a fault or a toxic.") {
            proxies.map { ($0.labels, $0.server.counters.cutByFault) }
        }
        text.family("chaos_connections_refused_total", "counter", "Clients reset because the upstream could not be reached.") {
            proxies.map { ($0.labels, $0.server.counters.upstreamFailures) }
        }
        text.family("chaos_bytes_total", "counter", "Bytes relayed, by proxy and direction.") {
            proxies.flatMap { proxy in
                [
                    (proxy.labels + [("direction", "upstream")], proxy.server.counters.upstream),
                    (proxy.labels + [("direction", "downstream")], proxy.server.counters.downstream),
                ]
            }
        }
        text.family("chaos_proxy_enabled", "gauge", "Whether the proxy accepts connections (1) or refuses them (0).") {
            proxies.map { ($0.labels, $0.enabled ? 1 : 0) }
        }
        // Faults active by kind: toxics by their type, API faults by their first key.
        var active: [String: Int64] = [:]
        for proxy in proxies { for toxic in proxy.toxics { active[toxic.toxic.type, default: 0] += 1 } }
        for rule in faults {
            let kind = rule.drop { !$0.isLetter }.prefix { $0.isLetter || $0 == "_" }
            active[String(kind), default: 0] += 1
        }
        text.family("chaos_faults_active", "gauge", "Faults and toxics active now, by kind.") {
            active.sorted { $0.key < $1.key }.map { ([("kind", $0.key)], $0.value) }
        }
        let audit = extras.metrics?() ?? ""
        return APIResponse(status: .ok, body: text.output + audit, contentType: "text/plain; version=0.0.4; charset=utf-8")
    }
}

extension ControlAPI.Managed {
    var labels: [(String, String)] { [("proxy", spec.name)] }
}

/// Prometheus text exposition (format 0.0.4), written by hand: a family's HELP and TYPE, then one line per sample.
package struct MetricsText: Sendable {
    /// The text so far.
    package private(set) var output = ""

    /// An empty exposition.
    package init() {}

    /// Adds the family `name` of `type` (`counter`, `gauge`) with its samples (labels, value).
    package mutating func family<Value: BinaryInteger>(
        _ name: String,
        _ type: String,
        _ help: String,
        samples: () -> [([(String, String)], Value)]
    ) {
        family(name, type, help, values: samples().map { ($0.0, Double($0.1)) })
    }

    /// Adds the family `name` of `type` with fractional samples.
    package mutating func family(_ name: String, _ type: String, _ help: String, values: [([(String, String)], Double)]) {
        output += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        samples(name, values)
    }

    /// Adds sample lines named `name` to the family just begun (a histogram's `_bucket`, `_sum`, `_count`).
    package mutating func samples(_ name: String, _ values: [([(String, String)], Double)]) {
        for (labels, value) in values {
            let rendered = labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",")
            let number = value == value.rounded() && abs(value) < 1e15 ? "\(Int64(value))" : "\(value)"
            output += labels.isEmpty ? "\(name) \(number)\n" : "\(name){\(rendered)} \(number)\n"
        }
    }

    /// A label value with `\\`, `"` and newlines escaped.
    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
