import Crypto

/// The key schedule's derivations (RFC 8446 §7.1 and §7.3 for TLS 1.3, RFC 5246 §5 and §6.3 for TLS 1.2), on
/// swift-crypto's HKDF and HMAC.
enum KeyDerivation {
    /// HKDF-Expand-Label(secret, label, "", length) of TLS 1.3: the info is the length, `"tls13 " + label` and an
    /// empty context, each length-prefixed.
    static func expandLabel(_ secret: [UInt8], _ label: String, length: Int, hash: CipherSuite.Hash) -> [UInt8] {
        let fullLabel = Array("tls13 \(label)".utf8)
        var info: [UInt8] = [UInt8(length >> 8), UInt8(length & 0xFF), UInt8(fullLabel.count)]
        info += fullLabel
        info.append(0)  // an empty context
        let key =
            switch hash {
            case .sha256: HKDF<SHA256>.expand(pseudoRandomKey: secret, info: info, outputByteCount: length)
            case .sha384: HKDF<SHA384>.expand(pseudoRandomKey: secret, info: info, outputByteCount: length)
            }
        return key.withUnsafeBytes { Array($0) }
    }

    /// The key and IV of a TLS 1.3 traffic secret.
    static func trafficKeys(_ secret: [UInt8], suite: CipherSuite) -> (key: [UInt8], iv: [UInt8]) {
        (
            expandLabel(secret, "key", length: suite.keyLength, hash: suite.hash),
            expandLabel(secret, "iv", length: 12, hash: suite.hash)
        )
    }

    /// The next generation of a TLS 1.3 traffic secret, after a KeyUpdate.
    static func nextTrafficSecret(_ secret: [UInt8], suite: CipherSuite) -> [UInt8] {
        expandLabel(secret, "traffic upd", length: suite.hashLength, hash: suite.hash)
    }

    /// TLS 1.2's PRF: P_hash(secret, label + seed) cut to `length` bytes.
    static func prf(secret: [UInt8], label: String, seed: [UInt8], length: Int, hash: CipherSuite.Hash) -> [UInt8] {
        switch hash {
        case .sha256: pHash(SHA256.self, secret: secret, seed: Array(label.utf8) + seed, length: length)
        case .sha384: pHash(SHA384.self, secret: secret, seed: Array(label.utf8) + seed, length: length)
        }
    }

    private static func pHash<H: HashFunction>(_: H.Type, secret: [UInt8], seed: [UInt8], length: Int) -> [UInt8] {
        let key = SymmetricKey(data: secret)
        var output: [UInt8] = []
        output.reserveCapacity(length + H.Digest.byteCount)
        var a = Array(HMAC<H>.authenticationCode(for: seed, using: key))
        while output.count < length {
            output += HMAC<H>.authenticationCode(for: a + seed, using: key)
            a = Array(HMAC<H>.authenticationCode(for: a, using: key))
        }
        return Array(output.prefix(length))
    }

    /// The TLS 1.2 write keys and IVs of an AEAD suite: the key block from the master secret and both randoms.
    static func tls12Keys(
        master: [UInt8],
        clientRandom: [UInt8],
        serverRandom: [UInt8],
        suite: CipherSuite
    )
        -> (client: (key: [UInt8], iv: [UInt8]), server: (key: [UInt8], iv: [UInt8]))
    {
        let ivLength = suite.aead == .chaCha20Poly1305 ? 12 : 4
        let block = prf(
            secret: master,
            label: "key expansion",
            seed: serverRandom + clientRandom,
            length: 2 * (suite.keyLength + ivLength),
            hash: suite.hash
        )
        let k = suite.keyLength
        return (
            (Array(block[0..<k]), Array(block[(2 * k)..<(2 * k + ivLength)])),
            (Array(block[k..<(2 * k)]), Array(block[(2 * k + ivLength)..<(2 * k + 2 * ivLength)]))
        )
    }
}
