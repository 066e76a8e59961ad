import Crypto
import Foundation

/// What TLS records and QUIC packets share: the per-record nonce and the AEAD that opens a sealed body (ciphertext,
/// then its 16-byte tag), both from swift-crypto.
extension CipherSuite.AEAD {
    /// The IV XOR a record's or packet's number, the number left-padded to the IV's 12 bytes (RFC 8446 §5.3, RFC 9001
    /// §5.3).
    static func nonce(iv: [UInt8], number: UInt64) -> [UInt8] {
        var nonce = iv
        withUnsafeBytes(of: number.bigEndian) { bytes in
            for index in 0..<8 { nonce[4 + index] ^= bytes[index] }
        }
        return nonce
    }

    /// Opens `body` (at least 16 bytes) under `key` and `nonce` with `aad`; nil when it does not authenticate.
    func open(_ body: ArraySlice<UInt8>, key: SymmetricKey, nonce: [UInt8], aad: ArraySlice<UInt8>) -> [UInt8]? {
        let ciphertext = body.dropLast(16)
        let tag = body.suffix(16)
        switch self {
        case .aes128GCM, .aes256GCM:
            guard let sealed = try? AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag) else { return nil }
            return (try? AES.GCM.open(sealed, using: key, authenticating: aad)).map { Array($0) }
        case .chaCha20Poly1305:
            guard let sealed = try? ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: ciphertext, tag: tag) else {
                return nil
            }
            return (try? ChaChaPoly.open(sealed, using: key, authenticating: aad)).map { Array($0) }
        }
    }
}
