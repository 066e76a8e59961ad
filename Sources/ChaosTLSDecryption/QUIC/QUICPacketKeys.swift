import Crypto
import Foundation
import _CryptoExtras

/// The packet protection of one direction at one encryption level (RFC 9001 §5): the AEAD key and IV that seal a
/// packet's payload, and the header protection key that hides its first byte's low bits and its packet number. All of
/// it from one secret: the Initial secret of the client's first Destination Connection ID, or a TLS traffic secret
/// from the key log; swift-crypto does the ciphers.
struct QUICPacketKeys: Sendable {
    let suite: CipherSuite
    let version: QUICVersion
    /// The secret it was derived from (a key update derives the next one from it).
    let secret: [UInt8]
    let key: SymmetricKey
    let iv: [UInt8]
    let headerKey: SymmetricKey

    enum Failure: Error, Equatable { case tooShort, authentication }

    /// The keys of `secret` under `suite` (its AEAD and hash), with `version`'s labels.
    init(secret: [UInt8], suite: CipherSuite, version: QUICVersion) {
        self.init(secret: secret, suite: suite, version: version, headerKey: nil)
    }

    private init(secret: [UInt8], suite: CipherSuite, version: QUICVersion, headerKey: SymmetricKey?) {
        self.suite = suite
        self.version = version
        self.secret = secret
        let prefix = version.labelPrefix
        key = SymmetricKey(data: KeyDerivation.expandLabel(secret, prefix + "key", length: suite.keyLength, hash: suite.hash))
        iv = KeyDerivation.expandLabel(secret, prefix + "iv", length: 12, hash: suite.hash)
        self.headerKey =
            headerKey ?? SymmetricKey(data: KeyDerivation.expandLabel(secret, prefix + "hp", length: suite.keyLength, hash: suite.hash))
    }

    /// The Initial keys of both directions for a connection whose client first sent to `destination` (RFC 9001 §5.2):
    /// AES-128-GCM with SHA-256, whatever the handshake later chooses.
    static func initial(destination: some Collection<UInt8>, version: QUICVersion) -> (client: QUICPacketKeys, server: QUICPacketKeys) {
        let extracted = HKDF<SHA256>.extract(inputKeyMaterial: SymmetricKey(data: Array(destination)), salt: version.initialSalt)
        let initialSecret = extracted.withUnsafeBytes { Array($0) }
        let suite = CipherSuite.quicInitial
        return (
            QUICPacketKeys(secret: KeyDerivation.expandLabel(initialSecret, "client in", length: 32, hash: .sha256), suite: suite, version: version),
            QUICPacketKeys(secret: KeyDerivation.expandLabel(initialSecret, "server in", length: 32, hash: .sha256), suite: suite, version: version)
        )
    }

    /// The keys after a key update (RFC 9001 §6.1): the next secret, the same header protection key.
    func updated() -> QUICPacketKeys {
        let next = KeyDerivation.expandLabel(secret, version.labelPrefix + "ku", length: suite.hashLength, hash: suite.hash)
        return QUICPacketKeys(secret: next, suite: suite, version: version, headerKey: headerKey)
    }

    /// The header protection mask of a packet whose 16-byte ciphertext sample is `sample` (RFC 9001 §5.4.3, §5.4.4).
    func headerMask(sample: ArraySlice<UInt8>) throws -> [UInt8] {
        guard sample.count == 16 else { throw Failure.tooShort }
        switch suite.aead {
        case .aes128GCM, .aes256GCM:
            var block = Array(sample)
            try AES.permute(&block, key: headerKey)
            return Array(block.prefix(5))
        case .chaCha20Poly1305:
            let counter = try Insecure.ChaCha20CTR.Counter(data: sample.prefix(4))
            let nonce = try Insecure.ChaCha20CTR.Nonce(data: sample.dropFirst(4))
            let mask = try Insecure.ChaCha20CTR.encrypt([UInt8](repeating: 0, count: 5), using: headerKey, counter: counter, nonce: nonce)
            return Array(mask)
        }
    }

    /// Opens a payload sealed under packet number `number`, the unprotected header its associated data (RFC 9001 §5.3).
    func open(payload: ArraySlice<UInt8>, header: ArraySlice<UInt8>, number: UInt64) throws -> [UInt8] {
        guard payload.count >= 16 else { throw Failure.tooShort }
        let nonce = CipherSuite.AEAD.nonce(iv: iv, number: number)
        guard let opened = suite.aead.open(payload, key: key, nonce: nonce, aad: header) else { throw Failure.authentication }
        return opened
    }
}

extension CipherSuite {
    /// What protects Initial packets (RFC 9001 §5.2).
    static let quicInitial = CipherSuite.supported(0x1301)!

    /// The TLS 1.3 suites QUIC can negotiate (RFC 9001 §5.3: not TLS_AES_128_CCM_8_SHA256; CCM chaos does not open).
    static func quic(_ code: UInt16) -> CipherSuite? {
        guard let suite = supported(code), suite.isTLS13 else { return nil }
        return suite
    }
}
