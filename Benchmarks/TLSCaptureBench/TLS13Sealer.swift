import Crypto
import Foundation

/// The benchmark's TLS 1.3 writer (TLS_AES_128_GCM_SHA256): hellos, a Finished under each handshake secret, then
/// application records under the traffic secrets, so that a capture of real-looking TLS can be made at any size
/// without a network. The secrets go to a key log like a client's.
struct TLS13Sealer {
    let clientRandom: [UInt8]
    let secrets: [String: [UInt8]]
    private var keys: [Bool: (key: SymmetricKey, iv: [UInt8], sequence: UInt64)] = [:]

    init(connection: Int, generator: inout some RandomNumberGenerator) {
        clientRandom = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var secrets: [String: [UInt8]] = [:]
        for label in [
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
        ] {
            secrets[label] = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        self.secrets = secrets
    }

    /// The key log lines of this connection.
    var keyLogLines: String {
        let random = clientRandom.map { String(format: "%02x", $0) }.joined()
        return secrets.keys.sorted().map { "\($0) \(random) \(secrets[$0]!.map { String(format: "%02x", $0) }.joined())\n" }.joined()
    }

    static func record(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        [type, 3, 3, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    static func handshake(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        [type, 0, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    var clientHello: [UInt8] {
        Self.record(22, Self.handshake(1, [3, 3] + clientRandom + [0, 0, 2, 0x13, 0x01, 1, 0, 0, 0]))
    }

    /// The ServerHello (supported_versions: TLS 1.3), then the server's Finished under its handshake secret.
    mutating func serverFlight() -> [UInt8] {
        let hello = Self.record(
            22,
            Self.handshake(
                2,
                [3, 3] + [UInt8](repeating: 7, count: 32) + [0, 0x13, 0x01, 0]
                    + [0, 6, 0, 43, 0, 2, 3, 4]
            )
        )
        use("SERVER_HANDSHAKE_TRAFFIC_SECRET", towardServer: false)
        let finished = seal(Self.handshake(20, [UInt8](repeating: 1, count: 32)), type: 22, towardServer: false)
        use("SERVER_TRAFFIC_SECRET_0", towardServer: false)
        return hello + finished
    }

    /// The client's Finished under its handshake secret.
    mutating func clientFinished() -> [UInt8] {
        use("CLIENT_HANDSHAKE_TRAFFIC_SECRET", towardServer: true)
        let finished = seal(Self.handshake(20, [UInt8](repeating: 2, count: 32)), type: 22, towardServer: true)
        use("CLIENT_TRAFFIC_SECRET_0", towardServer: true)
        return finished
    }

    private mutating func use(_ label: String, towardServer: Bool) {
        let secret = secrets[label]!
        keys[towardServer] = (SymmetricKey(data: Self.expandLabel(secret, "key", 16)), Self.expandLabel(secret, "iv", 12), 0)
    }

    /// One protected record of `type` holding `content`.
    mutating func seal(_ content: [UInt8], type: UInt8 = 23, towardServer: Bool) -> [UInt8] {
        var (key, iv, sequence) = keys[towardServer]!
        let inner = content + [type]
        let header: [UInt8] = [23, 3, 3, UInt8((inner.count + 16) >> 8), UInt8((inner.count + 16) & 0xFF)]
        withUnsafeBytes(of: sequence.bigEndian) { number in for index in 0..<8 { iv[4 + index] ^= number[index] } }
        let box = try! AES.GCM.seal(inner, using: key, nonce: try! AES.GCM.Nonce(data: iv), authenticating: header)
        sequence += 1
        keys[towardServer]!.sequence = sequence
        return header + Array(box.ciphertext) + Array(box.tag)
    }

    static func expandLabel(_ secret: [UInt8], _ label: String, _ length: Int) -> [UInt8] {
        let full = Array("tls13 \(label)".utf8)
        let info = [UInt8(length >> 8), UInt8(length & 0xFF), UInt8(full.count)] + full + [0]
        return HKDF<SHA256>.expand(pseudoRandomKey: secret, info: info, outputByteCount: length).withUnsafeBytes { Array($0) }
    }
}
