/// The cipher suites a capture's TLS can be decrypted under: TLS 1.3's three, and TLS 1.2's AEAD suites (ECDHE,
/// DHE or RSA key exchange: with the master secret from the key log the exchange does not matter).
struct CipherSuite: Sendable, Equatable {
    enum AEAD: Sendable { case aes128GCM, aes256GCM, chaCha20Poly1305 }
    enum Hash: Sendable { case sha256, sha384 }

    let code: UInt16
    let name: String
    let aead: AEAD
    /// The hash of the key schedule (TLS 1.3) or of the PRF (TLS 1.2).
    let hash: Hash
    /// A TLS 1.3 suite.
    let isTLS13: Bool

    var keyLength: Int { aead == .aes128GCM ? 16 : 32 }
    var hashLength: Int { hash == .sha256 ? 32 : 48 }

    /// The suite `code` names, when it is one chaos decrypts.
    static func supported(_ code: UInt16) -> CipherSuite? { all.first { $0.code == code } }

    static let all: [CipherSuite] = [
        CipherSuite(code: 0x1301, name: "TLS_AES_128_GCM_SHA256", aead: .aes128GCM, hash: .sha256, isTLS13: true),
        CipherSuite(code: 0x1302, name: "TLS_AES_256_GCM_SHA384", aead: .aes256GCM, hash: .sha384, isTLS13: true),
        CipherSuite(code: 0x1303, name: "TLS_CHACHA20_POLY1305_SHA256", aead: .chaCha20Poly1305, hash: .sha256, isTLS13: true),
        CipherSuite(code: 0xC02B, name: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", aead: .aes128GCM, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0xC02C, name: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", aead: .aes256GCM, hash: .sha384, isTLS13: false),
        CipherSuite(code: 0xC02F, name: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", aead: .aes128GCM, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0xC030, name: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", aead: .aes256GCM, hash: .sha384, isTLS13: false),
        CipherSuite(code: 0xCCA8, name: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", aead: .chaCha20Poly1305, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0xCCA9, name: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", aead: .chaCha20Poly1305, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0xCCAA, name: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", aead: .chaCha20Poly1305, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0x009E, name: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", aead: .aes128GCM, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0x009F, name: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", aead: .aes256GCM, hash: .sha384, isTLS13: false),
        CipherSuite(code: 0x009C, name: "TLS_RSA_WITH_AES_128_GCM_SHA256", aead: .aes128GCM, hash: .sha256, isTLS13: false),
        CipherSuite(code: 0x009D, name: "TLS_RSA_WITH_AES_256_GCM_SHA384", aead: .aes256GCM, hash: .sha384, isTLS13: false),
    ]

    /// The IANA name of an unsupported suite a capture may well show (CBC suites, 3DES…), else its number.
    static func describe(_ code: UInt16) -> String {
        if let known = supported(code) { return known.name }
        let others: [UInt16: String] = [
            0x1304: "TLS_AES_128_CCM_SHA256", 0x1305: "TLS_AES_128_CCM_8_SHA256",
            0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
            0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
            0xC023: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 0xC027: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
            0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA", 0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
            0x003C: "TLS_RSA_WITH_AES_128_CBC_SHA256", 0x000A: "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
            0xC0AC: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM", 0xC0AD: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
        ]
        let hex = String(code, radix: 16, uppercase: true)
        let number = "0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        return others[code].map { "\($0) (\(number))" } ?? "cipher suite \(number)"
    }
}
