public import ChaosCore
import Crypto
import Foundation
public import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// Leaf certificates for the names clients ask for (their SNI), signed by a ``CertificateAuthority``: ECDSA P-256,
/// valid a week from an hour ago, made on first use and kept for the run (at most ``capacity`` names, the oldest
/// forgotten first).
public final class LeafIssuer: Sendable {
    /// A leaf as NIOSSL takes it: the chain (leaf, then the CA) and the leaf's key.
    public struct Leaf: Sendable {
        public let chain: [NIOSSLCertificate]
        public let key: NIOSSLPrivateKey
    }

    /// The most names kept.
    public static let capacity = 1024

    private let authority: CertificateAuthority
    private let caCertificate: NIOSSLCertificate
    private let leaves = Mutex<(byName: [String: Leaf], order: [String])>(([:], []))

    /// An issuer signing with `authority`.
    public init(authority: CertificateAuthority) throws {
        self.authority = authority
        caCertificate = try NIOSSLCertificate(bytes: authority.derBytes, format: .der)
    }

    /// The leaf for `name` (a DNS name or an IP address), made now if new. Throws `badInput` for a name no
    /// certificate can carry.
    public func leaf(for name: String) throws -> Leaf {
        let name = name.lowercased()
        if let leaf = leaves.withLock({ $0.byName[name] }) { return leaf }
        let made = try make(name)
        return leaves.withLock { cache in
            if let leaf = cache.byName[name] { return leaf }
            cache.byName[name] = made
            cache.order.append(name)
            if cache.order.count > Self.capacity { cache.byName[cache.order.removeFirst()] = nil }
            return made
        }
    }

    private func make(_ name: String) throws -> Leaf {
        guard TLSSpec.isServerName(name) else { throw ChaosError.badInput("no certificate can name '\(name.prefix(80))'") }
        let signing = P256.Signing.PrivateKey()
        let key = Certificate.PrivateKey(signing)
        let now = Date()
        let alternative: GeneralName = if let address = Self.addressBytes(name) { .ipAddress(ASN1OctetString(contentBytes: address[...])) }
            else { .dnsName(name) }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: key.publicKey,
            notValidBefore: now.addingTimeInterval(-3_600), notValidAfter: now.addingTimeInterval(7 * 86_400),
            issuer: authority.certificate.subject,
            subject: try DistinguishedName { CommonName(String(name.prefix(64))) },
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
                SubjectAlternativeNames([alternative])
                SubjectKeyIdentifier(hash: key.publicKey)
            },
            issuerPrivateKey: authority.privateKey)
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Leaf(chain: [try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der), caCertificate],
                    key: try NIOSSLPrivateKey(bytes: Array(signing.pemRepresentation.utf8), format: .pem))
    }

    /// The bytes of an IPv4 or IPv6 address; nil for a DNS name.
    static func addressBytes(_ name: String) -> [UInt8]? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, name, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        if inet_pton(AF_INET6, name, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
