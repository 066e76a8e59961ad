import ChaosCore
import Foundation
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// Hostile bodies on every route that reads one: each gets an answer (never a crash, never a 5xx but a listen
/// address that cannot be bound), and the relay carries on untouched.
@Suite("HTTP control API under mutated bodies", .serialized, .timeLimit(.minutes(5)))
struct ControlAPIBadInputTests {
    static let seeds: [(path: String, body: String)] = [
        ("/proxies", #"{"name": "p1", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1", "enabled": true}"#),
        ("/populate", #"[{"name": "p2", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}]"#),
        (
            "/proxies/test/toxics",
            #"{"name": "t", "type": "latency", "stream": "upstream", "toxicity": 0.5, "attributes": {"latency": 10, "jitter": 1}}"#
        ),
        ("/proxies/test/toxics", #"{"type": "slicer", "attributes": {"average_size": 10, "size_variation": 3, "delay": 10}}"#),
        ("/proxies/test/toxics", #"{"type": "limit_data", "attributes": {"bytes": 100000000}}"#),
        ("/proxies/test/toxics/t", #"{"toxicity": 1, "attributes": {"latency": 5}}"#),
        ("/proxies/test", #"{"enabled": true}"#),
        ("/faults", #"{"latency": {"add": "1ms", "for": "10ms"}}"#),
    ]

    /// What a mutation may put in: JSON's structure, numbers at the edges, wrong types, text.
    static let pieces = [
        "{", "}", "[", "]", "\"", ",", ":", "-", "0", "1e400", "-9223372036854775809", "18446744073709551616",
        "null", "true", "\"x\"", "[]", "{}", "\\u0000", "é", "  ", "99999999999999999999", "0.5", "-1",
    ]

    static func mutate(_ text: String, using generator: inout SeededGenerator) -> String {
        var characters = Array(text)
        for _ in 0..<(1 + Int(generator.next(upperBound: 3))) {
            let piece = Array(pieces[Int(generator.next(upperBound: UInt64(pieces.count)))])
            let at = Int(generator.next(upperBound: UInt64(characters.count + 1)))
            let cut = min(characters.count - at, Int(generator.next(upperBound: 4)))
            characters.replaceSubrange(at..<(at + cut), with: piece)
        }
        return String(characters)
    }

    @Test("2000 mutations of valid bodies: every one answered 2xx or 4xx, and the relay still echoes")
    func mutatedBodies() async throws {
        let harness = try await ProxyHarness()
        let api = ControlAPI(proxies: [harness.proxy], group: harness.group, seed: 3)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let port = try #require(Int(address.split(separator: ":").last ?? ""))
        try await offPool {
            let (client, server) = try harness.connectPair()
            var generator = SeededGenerator(seed: 99)
            for round in 0..<2000 {
                let seed = Self.seeds[round % Self.seeds.count]
                let body = round < Self.seeds.count ? seed.body : Self.mutate(seed.body, using: &generator)
                let (status, answer) = try apiRequest(port, "POST", seed.path, body: body)
                let bindFailure = status == 500 && answer.contains("cannot listen")
                #expect((200..<500).contains(status) || bindFailure, "POST \(seed.path) \(body) -> \(status) \(answer)")
                #expect(answer.isEmpty || answer.hasPrefix("{") || answer.hasPrefix("["), "\(answer)")
            }
            #expect(try apiRequest(port, "POST", "/reset").0 == 204)
            #expect(try apiRequest(port, "DELETE", "/faults").0 == 200)
            try client.sendAll(Array("still here".utf8))
            #expect(server.receive(exactly: 10) == Array("still here".utf8))
            try server.sendAll([7])
            #expect(client.receive(exactly: 1) == [7])
            client.close()
            server.close()
        }
        await api.stop()
        await harness.shutdown()
    }
}
