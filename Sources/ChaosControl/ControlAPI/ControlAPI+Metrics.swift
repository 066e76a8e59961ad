import ChaosCore
import ChaosProxy
import Foundation
import NIOHTTP1
import Synchronization

/// `GET /metrics`: the proxies' counters in Prometheus's text format (version 0.0.4), read live: bytes are
/// counted as they are relayed, not when a connection closes.
extension ControlAPI {
    func metrics() -> APIResponse {
        let proxies = state.withLock { state in state.order.compactMap { state.proxies[$0] } }
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
        let udp = proxies.filter { $0.server.spec.transport == .udp }
        if !udp.isEmpty {
            text.family("chaos_datagrams_total", "counter", "Datagrams a UDP proxy read from either side.") {
                udp.map { ($0.labels, $0.server.counters.datagrams) }
            }
            text.family("chaos_datagrams_dropped_total", "counter", "Datagrams a UDP proxy dropped, by proxy and reason.") {
                udp.flatMap { proxy in
                    let dropped = proxy.server.counters.datagramsDropped
                    return DatagramDrop.allCases.map { (proxy.labels + [("reason", $0.rawValue)], dropped[$0] ?? 0) }
                }
            }
            text.family("chaos_datagrams_altered_total", "counter", "Datagrams a UDP proxy's faults duplicated or held back.") {
                udp.flatMap { proxy in
                    let altered = proxy.server.counters.datagramsAltered
                    return DatagramAlteration.allCases.map { (proxy.labels + [("effect", $0.rawValue)], altered[$0] ?? 0) }
                }
            }
        }
        text.family("chaos_proxy_enabled", "gauge", "Whether the proxy accepts connections (1) or refuses them (0).") {
            proxies.map { ($0.labels, $0.enabled ? 1 : 0) }
        }
        text.faults(faultTally.byKind, toxics: proxies.flatMap { $0.toxics.map(\.toxic.type) })
        if let resident = ProcessMemory.residentBytes() {
            text.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.") { [([], resident)] }
        }
        let audit = extras.metrics?() ?? ""
        return APIResponse(status: .ok, body: text.output + audit, contentType: "text/plain; version=0.0.4; charset=utf-8")
    }
}

extension MetricsText {
    /// The faults by kind: occurrences begun and connections touched (counters), and those on now with the toxics on the
    /// proxies (a gauge), each kind seen so far with a sample.
    mutating func faults(_ tallied: [String: FaultTally.Counts], toxics: [String]) {
        var active = tallied.mapValues(\.active)
        for type in toxics { active[type, default: 0] += 1 }
        family("chaos_faults_active", "gauge", "Faults and toxics on now, by kind (0 for a kind that was on before).") {
            active.sorted { $0.key < $1.key }.map { ([("kind", $0.key)], $0.value) }
        }
        let kinds = tallied.sorted { $0.key < $1.key }
        family("chaos_fault_occurrences_total", "counter", "Fault occurrences begun (a toxic: as it was added), by kind.") {
            kinds.map { ([("kind", $0.key)], $0.value.occurrences) }
        }
        family(
            "chaos_fault_connections_touched_total",
            "counter",
            "Connections fault occurrences touched, by kind: those live as one began, and new ones it reached while on."
        ) { kinds.map { ([("kind", $0.key)], $0.value.connectionsTouched) } }
    }
}

extension ControlAPI.Managed {
    var labels: [(String, String)] { [("proxy", spec.name)] }
}
