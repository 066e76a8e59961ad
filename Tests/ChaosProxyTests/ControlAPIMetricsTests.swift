import ChaosCore
import Foundation
import Testing

@testable import ChaosControl
@testable import ChaosProxy

@Suite("GET /metrics: faults by kind and the process's memory", .serialized, .timeLimit(.minutes(5)))
struct ControlAPIMetricsTests {
    /// The sample `series` (name and labels as written) in an exposition, if it is there.
    func sample(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test(
        "an API fault and a toxic count as occurrences of their kind with the connections they hit; on while they last, 0 after (the kind stays); resident memory is the process's"
    )
    func faultsByKind() async throws {
        try await withControlAPI { harness, port in
            let (client, server) = try harness.connectPair()
            defer {
                client.close()
                server.close()
            }
            // Relayed: the connection is live on the proxy before the faults begin.
            try client.sendAll([1])
            #expect(server.receive(exactly: 1) == [1])
            #expect(try apiRequest(port, "POST", "/faults", body: #"{"partition": {"direction": "upstream"}}"#).0 == 201)
            let toxic = #"{"type": "latency", "attributes": {"latency": 5}}"#
            #expect(try apiRequest(port, "POST", "/proxies/test/toxics", body: toxic).0 == 200)
            let on = try apiRequest(port, "GET", "/metrics").1
            #expect(sample(#"chaos_fault_occurrences_total{kind="partition"}"#, in: on) == 1, "\(on)")
            #expect(sample(#"chaos_fault_connections_touched_total{kind="partition"}"#, in: on) == 1)
            #expect(sample(#"chaos_faults_active{kind="partition"}"#, in: on) == 1)
            #expect(sample(#"chaos_fault_occurrences_total{kind="latency"}"#, in: on) == 1)
            #expect(sample(#"chaos_fault_connections_touched_total{kind="latency"}"#, in: on) == 1)
            #expect(sample(#"chaos_faults_active{kind="latency"}"#, in: on) == 1)
            let resident = try #require(sample("process_resident_memory_bytes", in: on))
            #expect(resident > 1_000_000 && resident < 64_000_000_000, "\(resident)")

            #expect(try apiRequest(port, "DELETE", "/faults/1").0 == 200)
            #expect(try apiRequest(port, "DELETE", "/proxies/test/toxics/latency_downstream").0 == 204)
            let off = try apiRequest(port, "GET", "/metrics").1
            #expect(sample(#"chaos_faults_active{kind="partition"}"#, in: off) == 0, "\(off)")
            #expect(sample(#"chaos_faults_active{kind="latency"}"#, in: off) == 0)
            #expect(sample(#"chaos_fault_occurrences_total{kind="partition"}"#, in: off) == 1)
            #expect(off.contains("# TYPE chaos_fault_occurrences_total counter\n"))
            #expect(off.contains("# TYPE process_resident_memory_bytes gauge\n"))
        }
    }

    @Test(
        "a sample's value is written as Prometheus reads it",
        arguments: [(3.0, "3"), (0.25, "0.25"), (Double.nan, "NaN"), (Double.infinity, "+Inf")]
    )
    func numbers(value: Double, written: String) {
        #expect(MetricsText.number(value) == written)
    }

    @Test("label values are escaped only where they need it: backslash, double quote, newline")
    func labelEscaping() {
        var text = MetricsText()
        text.family("chaos_x", "gauge", "x") { [([("proxy", "plain"), ("direction", "up")], 1), ([("proxy", "a\"b\\c\nd")], 2)] }
        #expect(
            text.output
                == "# HELP chaos_x x\n# TYPE chaos_x gauge\nchaos_x{proxy=\"plain\",direction=\"up\"} 1\nchaos_x{proxy=\"a\\\"b\\\\c\\nd\"} 2\n"
        )
    }
}
