import ChaosCore
import ChaosProxy
import Foundation
import Testing

@testable import ChaosControl

/// The control API with a bearer token (as it must be when bound off loopback): nothing answered without the token or
/// with another, 401 naming the scheme; everything with it; `/metrics` open only with `metricsOpen`.
@Suite("Control API access: the bearer token")
struct ControlAPIAccessTests {
    static let token = "s3cret-token-0123456789"

    static func withTokenAPI(metricsOpen: Bool, _ body: @escaping @Sendable (Int) throws -> Void) async throws {
        let file = NSTemporaryDirectory() + "chaos-token-\(UUID().uuidString)"
        try (Self.token + "\n").write(toFile: file, atomically: true, encoding: .utf8)  // a final newline, as files have
        defer { try? FileManager.default.removeItem(atPath: file) }
        let harness = try await ProxyHarness()
        let factory = ProxyFactory(group: harness.group, sink: nil, clock: RunClock(), seed: SeededGenerator(seed: 0))
        let api = ControlAPI(proxies: [harness.proxy], factory: factory, access: try APIAccess(tokenFile: file, metricsOpen: metricsOpen))
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let port = try #require(Int(address.split(separator: ":").last ?? ""))
        try await offPool { try body(port) }
        await api.stop()
        await harness.shutdown()
    }

    @Test("no token, a wrong one, a longer one, another scheme: 401 and nothing done; the right token: answered")
    func bearer() async throws {
        try await Self.withTokenAPI(metricsOpen: false) { port throws in
            for headers in [
                [], ["Authorization: Bearer wrong"], ["Authorization: Bearer \(Self.token)x"],
                ["Authorization: Basic \(Self.token)"], ["Authorization: Bearer \(Self.token.dropLast())"],
            ] {
                let (status, body) = try apiRequest(port, "POST", "/faults", body: #"{"disconnect": {"at": "1s"}}"#, headers: headers)
                #expect(status == 401 && body.contains("requires a bearer token") && !body.contains(Self.token), "\(headers): \(status) \(body)")
                #expect(try apiRequest(port, "GET", "/metrics", headers: headers).0 == 401, "\(headers)")
            }
            let right = ["Authorization: Bearer \(Self.token)"]
            let (faults, faultsBody) = try apiRequest(port, "GET", "/faults", headers: right)
            #expect(faults == 200, "\(faults) \(faultsBody)")
            let (listed, body) = try apiRequest(port, "GET", "/proxies", headers: right)
            #expect(listed == 200 && body.contains("listen"), "\(listed) \(body)")
            let (metrics, metricsBody) = try apiRequest(port, "GET", "/metrics", headers: right)
            #expect(metrics == 200, "\(metrics) \(metricsBody.prefix(200))")
        }
    }

    @Test("metricsOpen: /metrics without the token, everything else still 401")
    func metricsOpen() async throws {
        try await Self.withTokenAPI(metricsOpen: true) { port throws in
            #expect(try apiRequest(port, "GET", "/metrics").0 == 200)
            #expect(try apiRequest(port, "GET", "/proxies").0 == 401)
            #expect(try apiRequest(port, "GET", "/metrics/").0 == 401, "only the exact path is open")
        }
    }

    @Test("the comparison takes every byte, and the token file's rules: one word of 16 or more characters")
    func rules() throws {
        #expect(APIAccess.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!APIAccess.constantTimeEqual(Array("abd".utf8), Array("abc".utf8)))
        #expect(!APIAccess.constantTimeEqual(Array("ab".utf8), Array("abc".utf8)))
        #expect(!APIAccess.constantTimeEqual([], Array("abc".utf8)))
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"] { #expect(APIAccess.isLoopback(host), "\(host)") }
        for host in ["0.0.0.0", "10.0.0.1", "::", "example.com"] { #expect(!APIAccess.isLoopback(host), "\(host)") }
        let file = NSTemporaryDirectory() + "chaos-token-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        for bad in ["short", "", "two words of sixteen chars"] {
            try bad.write(toFile: file, atomically: true, encoding: .utf8)
            #expect(throws: ChaosError.self) { try APIAccess(tokenFile: file, metricsOpen: false) }
        }
        #expect(throws: ChaosError.self) { try APIAccess(tokenFile: file + "-missing", metricsOpen: false) }
    }
}
