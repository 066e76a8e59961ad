import ChaosCore
import ChaosTLSDecryption
import Foundation
import Testing

/// The NSS key log reader: every label chaos needs, comments and unknown labels skipped, and a malformed line is bad
/// input naming the file, line and column.
@Suite("NSS key log")
struct KeyLogTests {
    static let random = String(repeating: "ab", count: 32)

    @Test("TLS 1.2 and 1.3 lines are read by client random; comments, blank lines, CRLF and other labels are skipped")
    func reads() throws {
        let text = """
            # a comment
            CLIENT_RANDOM \(Self.random) \(String(repeating: "01", count: 48))\r

            CLIENT_HANDSHAKE_TRAFFIC_SECRET \(String(repeating: "cd", count: 32)) \(String(repeating: "02", count: 32))
            SERVER_HANDSHAKE_TRAFFIC_SECRET \(String(repeating: "cd", count: 32)) \(String(repeating: "03", count: 32))
            CLIENT_TRAFFIC_SECRET_0 \(String(repeating: "CD", count: 32)) \(String(repeating: "04", count: 48))
            EXPORTER_SECRET \(String(repeating: "cd", count: 32)) \(String(repeating: "05", count: 32))
            RSA 0011223344556677 \(String(repeating: "06", count: 48))
            """
        var log = KeyLog()
        try log.add(text: Array(text.utf8), source: "keys.log")
        #expect(log.count == 2)
        #expect(log.secrets(for: [UInt8](repeating: 0xAB, count: 32))?.masterSecret == [UInt8](repeating: 1, count: 48))
        let tls13 = try #require(log.secrets(for: [UInt8](repeating: 0xCD, count: 32)))
        #expect(tls13.clientHandshake == [UInt8](repeating: 2, count: 32) && tls13.serverHandshake == [UInt8](repeating: 3, count: 32))
        #expect(tls13.clientTraffic == [UInt8](repeating: 4, count: 48) && tls13.serverTraffic == nil)
    }

    @Test(
        "a malformed line is bad input at file:line:column",
        arguments: [
            ("CLIENT_RANDOM \(random)", "keys.log:2:1: 2 field(s)"),
            ("CLIENT_RANDOM \(random) 00 extra", "keys.log:2:83: 4 fields"),
            ("CLIENT_RANDOM zz\(random.dropFirst(2)) \(String(repeating: "01", count: 48))", "keys.log:2:15: the client random is not hex"),
            ("CLIENT_RANDOM \(random) 0", "keys.log:2:80: the secret is not hex"),
            ("CLIENT_RANDOM \(random.dropFirst(2)) \(String(repeating: "01", count: 48))", "keys.log:2:15: a client random of 31 bytes"),
            ("CLIENT_RANDOM \(random) \(String(repeating: "01", count: 40))", "keys.log:2:80: a master secret of 40 bytes, not 48"),
            ("  SERVER_TRAFFIC_SECRET_0 \(random) \(String(repeating: "01", count: 20))", "keys.log:2:92: a traffic secret of 20 bytes"),
            ("client_random \(random) \(String(repeating: "01", count: 48))", "keys.log:2:1: the label is not an upper-case name"),
        ]
    )
    func malformed(line: String, message: String) throws {
        var log = KeyLog()
        let text = "# first line\n\(line)\n"
        let error = try #require(throws: ChaosError.self) { try log.add(text: Array(text.utf8), source: "keys.log") }
        #expect(error.message.contains("key log " + message), "\(error.message)")
    }

    @Test("a missing key log file is bad input naming it")
    func missing() throws {
        var log = KeyLog()
        let error = try #require(throws: ChaosError.self) { try log.read(path: "/nonexistent/keys.log") }
        #expect(error.message.contains("/nonexistent/keys.log"))
    }
}
