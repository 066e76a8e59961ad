import Crypto
import Foundation

/// Opens the protected records of one direction under one key (RFC 8446 §5.2–5.4, RFC 5288, RFC 7905): the nonce
/// from the IV and the record's sequence number (TLS 1.2 GCM: the record's explicit nonce), the AEAD from
/// swift-crypto. A new key starts a new cipher at sequence number 0.
struct RecordCipher {
    let suite: CipherSuite
    private let key: SymmetricKey
    private let iv: [UInt8]
    /// The number of the next record.
    private(set) var sequence: UInt64 = 0

    init(suite: CipherSuite, key: [UInt8], iv: [UInt8]) {
        self.suite = suite
        self.key = SymmetricKey(data: key)
        self.iv = iv
    }

    enum Failure: Error { case tooShort, authentication, noContentType }

    /// Opens a TLS 1.3 record (`header` is its 5 bytes): the inner plaintext's content and its real content type.
    mutating func openTLS13(header: ArraySlice<UInt8>, body: ArraySlice<UInt8>) throws -> (type: UInt8, content: [UInt8]) {
        guard body.count >= 17 else { throw Failure.tooShort }
        var inner = try open(nonce: xorNonce(), body: body, aad: header)
        sequence &+= 1
        // The content type is the last non-zero byte; zeros after it are padding.
        while let last = inner.last, last == 0 { inner.removeLast() }
        guard let type = inner.popLast() else { throw Failure.noContentType }
        return (type, inner)
    }

    /// Opens a TLS 1.2 record of content type `type` (`version` from its header).
    mutating func openTLS12(type: UInt8, version: (UInt8, UInt8), body: ArraySlice<UInt8>) throws -> [UInt8] {
        let explicit = suite.aead == .chaCha20Poly1305 ? 0 : 8
        guard body.count >= explicit + 16 else { throw Failure.tooShort }
        let nonce = explicit == 0 ? xorNonce() : iv + body.prefix(8)
        let plaintextLength = body.count - explicit - 16
        var aad: [UInt8] = withUnsafeBytes(of: sequence.bigEndian) { Array($0) }
        aad += [type, version.0, version.1, UInt8(plaintextLength >> 8), UInt8(plaintextLength & 0xFF)]
        let content = try open(nonce: nonce, body: body.dropFirst(explicit), aad: aad[...])
        sequence &+= 1
        return content
    }

    /// The IV XOR the sequence number, left-padded to 12 bytes.
    private func xorNonce() -> [UInt8] { CipherSuite.AEAD.nonce(iv: iv, number: sequence) }

    private func open(nonce: [UInt8], body: ArraySlice<UInt8>, aad: ArraySlice<UInt8>) throws -> [UInt8] {
        guard let opened = suite.aead.open(body, key: key, nonce: nonce, aad: aad) else { throw Failure.authentication }
        return opened
    }
}
