import ChaosCore
@testable import ChaosProxy
import Foundation
import Testing

@Suite("HTTP control API", .serialized, .timeLimit(.minutes(1)))
struct ControlAPITests {
    /// Sends one HTTP/1.1 request; returns (status code, body).
    func request(_ port: Int, _ method: String, _ path: String, body: String = "") throws -> (Int, String) {
        let socket = try TestSocket.connect(port: port)
        defer { socket.close() }
        let text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        try socket.sendAll(Array(text.utf8))
        let (bytes, _) = socket.receiveUntilEnd()
        let response = String(decoding: bytes, as: UTF8.self)
        let status = Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0
        let payload = response.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (status, payload)
    }

    @Test("a fault posted as JSON is applied at once and lifted by DELETE; bad requests get 400 with the reason")
    func postAndDeleteFaults() async throws {
        let harness = try await ProxyHarness()
        let api = ControlAPI(proxies: [harness.proxy], group: harness.group)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let apiPort = try #require(Int(address.split(separator: ":").last ?? ""))
        try await offPool {
            let (client, server) = try harness.connectPair()
            let (created, body) = try request(apiPort, "POST", "/faults",
                                              body: #"{"latency": {"add": "150ms", "direction": "upstream"}}"#)
            #expect(created == 201, "\(body)")
            #expect(body.contains(#""id":1"#))
            let start = DispatchTime.now().uptimeNanoseconds
            try client.sendAll([1])
            #expect(server.receive(exactly: 1) == [1])
            #expect(DispatchTime.now().uptimeNanoseconds - start >= 150_000_000)
            #expect(try request(apiPort, "GET", "/faults").1.contains("latency"))
            #expect(try request(apiPort, "GET", "/proxies").1.contains(#""test":{"enabled":true"#))
            #expect(try request(apiPort, "GET", "/metrics").1.contains(#"chaos_connections_live{proxy="test"} 1"#))
            #expect(try request(apiPort, "DELETE", "/faults/1").0 == 200)
            #expect(try request(apiPort, "GET", "/faults").1.contains(#""faults":[]"#))
            let (bad, reason) = try request(apiPort, "POST", "/faults", body: #"{"latency": {"add": "soon"}}"#)
            #expect(bad == 400)
            #expect(reason.contains("request body:1:"), "\(reason)")
            #expect(reason.contains("not a duration"))
            #expect(try request(apiPort, "DELETE", "/faults/7").0 == 404)
            #expect(try request(apiPort, "GET", "/nothing").0 == 404)
            client.close(); server.close()
        }
        await api.stop()
        await harness.shutdown()
    }
}
