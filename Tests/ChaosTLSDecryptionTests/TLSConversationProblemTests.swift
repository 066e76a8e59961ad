import ChaosCore
import ChaosTLSDecryption
import Testing

/// Bad TLS in a capture: each a problem naming the conversation and record, the rest still read, never a crash.
@Suite("TLS decryption problems")
struct TLSConversationProblemTests {
    static func record(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        [type, 3, 3, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    static func handshake(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        [type, UInt8(body.count >> 16), UInt8(body.count >> 8 & 0xFF), UInt8(body.count & 0xFF)] + body
    }

    /// A ClientHello offering `suite`, no extensions.
    static func clientHello(random: UInt8 = 1, suite: UInt16 = 0xC02F) -> [UInt8] {
        handshake(1, [3, 3] + [UInt8](repeating: random, count: 32) + [0] + [0, 2, UInt8(suite >> 8), UInt8(suite & 0xFF)] + [1, 0])
    }

    /// A ServerHello choosing `suite`; a TLS 1.3 suite (0x13xx) comes with supported_versions saying TLS 1.3.
    static func serverHello(suite: UInt16) -> [UInt8] {
        let versions: [UInt8] = suite >> 8 == 0x13 ? [0, 6, 0x00, 0x2B, 0, 2, 3, 4] : []
        return handshake(2, [3, 3] + [UInt8](repeating: 9, count: 32) + [0, UInt8(suite >> 8), UInt8(suite & 0xFF), 0] + versions)
    }

    static func problems(_ outputs: [TLSConversation.Output]) -> [String] {
        outputs.compactMap { if case .note(.problem(let reason)) = $0 { reason } else { nil } }
    }

    static func conversation() -> TLSConversation { TLSConversation(keyLog: KeyLog(), client: "10.0.0.1:5000", server: "10.0.0.2:443") }

    @Test("a capture that starts mid-connection says so, and nothing is decrypted")
    func midConnection() {
        let tls = Self.conversation()
        let outputs = tls.receive(Self.record(23, [UInt8](repeating: 7, count: 40)), towardServer: true)
        let problems = Self.problems(outputs)
        #expect(problems.count == 1 && problems[0].contains("starts mid-connection"), "\(problems)")
        #expect(problems[0].contains("10.0.0.1:5000 → 10.0.0.2:443"))
        #expect(tls.receive(Self.record(23, [1, 2, 3]), towardServer: false).isEmpty)
    }

    @Test("a record over 2^14 + 256 bytes is named by its number; the other direction goes on")
    func oversizedRecord() {
        let tls = Self.conversation()
        #expect(Self.problems(tls.receive(Self.record(22, Self.clientHello()), towardServer: true)).isEmpty)
        let header: [UInt8] = [23, 3, 3, 0x42, 0x01]  // 16,897 bytes
        let problems = Self.problems(tls.receive(header + [UInt8](repeating: 0, count: 100), towardServer: true))
        #expect(problems.count == 1 && problems[0].contains("record 2 is 16897 bytes, over 2^14 + 256"), "\(problems)")
        #expect(problems[0].contains("client → server"))
        // The server's hello still reads (and finds no keys).
        let server = Self.problems(tls.receive(Self.record(22, Self.serverHello(suite: 0xC02F)), towardServer: false))
        #expect(server.count == 1 && server[0].contains("no keys for client random 0101"), "\(server)")
    }

    @Test("a handshake message split across more than 64 records is refused, naming the record")
    func handshakeSplit() {
        let tls = Self.conversation()
        var bytes = Self.record(22, Self.clientHello())
        // A 300-byte handshake message (a certificate, say) one byte per record.
        for byte in Self.handshake(11, [UInt8](repeating: 0, count: 300)).prefix(100) { bytes += Self.record(22, [byte]) }
        let problems = Self.problems(tls.receive(bytes, towardServer: true))
        #expect(problems.count == 1 && problems[0].contains("split across more than 64 records (at record 65)"), "\(problems)")
    }

    @Test("an unsupported suite is named; unknown numbers are given in hex")
    func unsupportedSuite() {
        for (suite, name) in [
            (UInt16(0xC013), "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA (0xC013)"), (0x1304, "TLS_AES_128_CCM_SHA256"),
            (0xABCD, "cipher suite 0xABCD"),
        ] {
            let tls = Self.conversation()
            _ = tls.receive(Self.record(22, Self.clientHello(suite: suite)), towardServer: true)
            let problems = Self.problems(tls.receive(Self.record(22, Self.serverHello(suite: suite)), towardServer: false))
            #expect(problems.count == 1 && problems[0].contains(name) && problems[0].contains("not a suite chaos decrypts"), "\(problems)")
        }
    }

    @Test("capture loss inside a direction stops that direction at its record")
    func captureLoss() {
        let tls = Self.conversation()
        _ = tls.receive(Self.record(22, Self.clientHello()), towardServer: true)
        let problems = Self.problems(tls.receive(Self.record(23, [1, 2, 3]), towardServer: true, captureLoss: 1_200))
        #expect(problems.count == 1 && problems[0].contains("capture loss after record 1"), "\(problems)")
    }

    @Test(
        "no keys, and the client sent nothing after its ClientHello but ChangeCipherSpecs and alerts: an abandoned handshake, not a problem",
        arguments: [UInt16(0xC02F), 0x1301]
    )
    func abandonedHandshake(suite: UInt16) {
        let tls = Self.conversation()
        _ = tls.receive(Self.record(22, Self.clientHello(suite: suite)), towardServer: true)
        #expect(
            Self.problems(
                tls.receive(
                    Self.record(22, Self.serverHello(suite: suite)) + Self.record(23, [1, 2, 3]),
                    towardServer: false
                )
            ).isEmpty
        )
        let ccs = Self.record(20, [1])
        let alert = Self.record(21, [2, 40])
        // A ChangeCipherSpec and an alert, the alert's bytes split across two reads.
        #expect(Self.problems(tls.receive(ccs + alert.prefix(3), towardServer: true)).isEmpty)
        #expect(Self.problems(tls.receive(Array(alert.dropFirst(3)), towardServer: true)).isEmpty)
        #expect(tls.abandonedHandshake && !tls.hadProblem)
    }

    @Test(
        "no keys, and the client goes on (a key exchange, a Finished, data): the problem names the client random",
        arguments: [Self.record(22, Self.handshake(16, [0, 1, 2])), Self.record(23, [UInt8](repeating: 5, count: 30))]
    )
    func clientWentOnWithoutKeys(next: [UInt8]) {
        let tls = Self.conversation()
        _ = tls.receive(Self.record(22, Self.clientHello()), towardServer: true)
        #expect(Self.problems(tls.receive(Self.record(22, Self.serverHello(suite: 0xC02F)), towardServer: false)).isEmpty)
        #expect(tls.abandonedHandshake)
        // The record comes in two reads: its header first.
        #expect(Self.problems(tls.receive(Self.record(20, [1]) + next.prefix(4), towardServer: true)).isEmpty)
        let problems = Self.problems(tls.receive(Array(next.dropFirst(4)), towardServer: true))
        #expect(problems.count == 1 && problems[0].contains("no keys for client random 0101"), "\(problems)")
        #expect(!tls.abandonedHandshake && tls.hadProblem)
        #expect(tls.receive(Self.record(23, [1, 2, 3]), towardServer: true).isEmpty, "nothing more once stopped")
    }

    @Test(
        "TLS 1.3 with only the server's handshake secret logged (a client cut after reading the ServerHello, before its Finished): abandoned; the client's next protected record makes it a problem"
    )
    func serverHandshakeSecretOnly() throws {
        var keyLog = KeyLog()
        let random = String(repeating: "01", count: 32)
        try keyLog.add(text: Array("SERVER_HANDSHAKE_TRAFFIC_SECRET \(random) \(String(repeating: "ab", count: 32))\n".utf8), source: "keys.log")
        for goesOn in [false, true] {
            let tls = TLSConversation(keyLog: keyLog, client: "10.0.0.1:5000", server: "10.0.0.2:443")
            _ = tls.receive(Self.record(22, Self.clientHello(suite: 0x1303)), towardServer: true)
            let flight = Self.record(22, Self.serverHello(suite: 0x1303)) + Self.record(20, [1]) + Self.record(23, [UInt8](repeating: 4, count: 40))
            #expect(Self.problems(tls.receive(flight, towardServer: false)).isEmpty)
            #expect(Self.problems(tls.receive(Self.record(20, [1]), towardServer: true)).isEmpty)
            #expect(tls.abandonedHandshake && !tls.hadProblem)
            guard goesOn else { continue }
            let problems = Self.problems(tls.receive(Self.record(23, [UInt8](repeating: 5, count: 30)), towardServer: true))
            #expect(problems.count == 1 && problems[0].contains("no handshake traffic secrets for client random 0101"), "\(problems)")
            #expect(!tls.abandonedHandshake && tls.hadProblem)
        }
    }

    @Test("no keys, and the client's protected records came before the ServerHello: a problem at once")
    func clientRecordsBeforeServerHello() {
        let tls = Self.conversation()
        _ = tls.receive(Self.record(22, Self.clientHello(suite: 0x1301)) + Self.record(23, [UInt8](repeating: 5, count: 30)), towardServer: true)
        let problems = Self.problems(tls.receive(Self.record(22, Self.serverHello(suite: 0x1301)), towardServer: false))
        #expect(problems.count == 1 && problems[0].contains("no keys for client random"), "\(problems)")
        #expect(!tls.abandonedHandshake)
    }

    @Test("garbage after a ClientHello never crashes: every prefix of random records", arguments: 0..<20)
    func garbage(seed: Int) {
        var generator = SeededGenerator(seed: UInt64(seed))
        let tls = Self.conversation()
        _ = tls.receive(Self.record(22, Self.clientHello()), towardServer: true)
        for _ in 0..<50 {
            let length = Int.random(in: 0...300, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let towardServer = Bool.random(using: &generator)
            _ = tls.receive(
                Bool.random(using: &generator) ? Self.record(UInt8.random(in: 20...23, using: &generator), bytes) : bytes,
                towardServer: towardServer
            )
            _ = tls.acknowledge(towardServer: towardServer, tcpBytes: Int64.random(in: 0...100_000, using: &generator))
        }
    }
}
