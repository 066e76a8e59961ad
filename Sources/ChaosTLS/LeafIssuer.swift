import ChaosCore
import Crypto
import Foundation
package import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// Leaf certificates for the names clients ask for (their SNI), signed by a ``CertificateAuthority``: ECDSA P-256,
/// valid a week from an hour ago, made on first use and kept for the run (at most ``capacity`` names, the oldest
/// forgotten first).
package final class LeafIssuer: Sendable {
    /// A leaf as NIOSSL takes it: the chain (leaf, then the CA) and the leaf's key.
    package struct Leaf: Sendable {
        package let chain: [NIOSSLCertificate]
        package let key: NIOSSLPrivateKey
    }

    /// The most names kept.
    package static let capacity = 1024

    private let authority: CertificateAuthority
    private let caCertificate: NIOSSLCertificate
    private let leaves = Mutex<(byName: [String: Leaf], order: [String])>(([:], []))

    /// An issuer signing with `authority`.
    package init(authority: CertificateAuthority) throws {
        self.authority = authority
        caCertificate = try NIOSSLCertificate(bytes: authority.derBytes, format: .der)
    }

    /// The most names a leaf copies from its upstream's certificate.
    package static let copiedNamesLimit = 100

    /// The leaf for `name` (a DNS name or an IP address), made now if new, also naming `alsoNaming` (the verified
    /// upstream certificate's other names: DNS names, wildcards, IP addresses; those no certificate can carry are
    /// skipped). Throws `badInput` for a `name` no certificate can carry.
    package func leaf(for name: String, alsoNaming others: [String] = []) throws -> Leaf {
        let name = name.lowercased()
        let extra = Self.copyable(others, besides: name)
        let key = ([name] + extra).joined(separator: "\u{0}")
        if let leaf = leaves.withLock({ $0.byName[key] }) { return leaf }
        let made = try make(name, extra: extra)
        return leaves.withLock { cache in
            if let leaf = cache.byName[key] { return leaf }
            cache.byName[key] = made
            cache.order.append(key)
            if cache.order.count > Self.capacity { cache.byName[cache.order.removeFirst()] = nil }
            return made
        }
    }

    /// `names` lowercased, without `name`, repeats and names no certificate can carry, in order, at most
    /// ``copiedNamesLimit``.
    static func copyable(_ names: [String], besides name: String) -> [String] {
        var seen: Set<String> = [name]
        var kept: [String] = []
        for other in names.lazy.map({ $0.lowercased() }) where kept.count < copiedNamesLimit {
            let bare = other.hasPrefix("*.") ? String(other.dropFirst(2)) : other
            guard TLSSpec.isServerName(bare), seen.insert(other).inserted else { continue }
            kept.append(other)
        }
        return kept
    }

    private func make(_ name: String, extra: [String]) throws -> Leaf {
        guard TLSSpec.isServerName(name) else { throw ChaosError.badInput("no certificate can name '\(name.prefix(80))'") }
        let signing = P256.Signing.PrivateKey()
        let key = Certificate.PrivateKey(signing)
        let now = Date()
        let alternatives: [GeneralName] = ([name] + extra).map { name in
            if let address = Self.addressBytes(name) { .ipAddress(ASN1OctetString(contentBytes: address[...])) } else { .dnsName(name) }
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: key.publicKey,
            notValidBefore: now.addingTimeInterval(-3_600),
            notValidAfter: now.addingTimeInterval(7 * 86_400),
            issuer: authority.certificate.subject,
            subject: try DistinguishedName { CommonName(String(name.prefix(64))) },
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
                SubjectAlternativeNames(alternatives)
                SubjectKeyIdentifier(hash: key.publicKey)
            },
            issuerPrivateKey: authority.privateKey
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Leaf(
            chain: [try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der), caCertificate],
            key: try NIOSSLPrivateKey(bytes: Array(signing.pemRepresentation.utf8), format: .pem)
        )
    }

    /// The DNS names and IP addresses among `certificate`'s subject alternative names (none when it has none or
    /// they cannot be read).
    package static func alternativeNames(of certificate: NIOSSLCertificate) -> [String] {
        guard let der = try? certificate.toDERBytes(), let parsed = try? Certificate(derEncoded: der),
            let names = try? parsed.extensions.subjectAlternativeNames
        else { return [] }
        return names.compactMap { name in
            switch name {
            case .dnsName(let dns): return dns
            case .ipAddress(let octets): return Self.addressText(Array(octets.bytes))
            default: return nil
            }
        }
    }

    /// The text of a 4- or 16-byte address; nil otherwise.
    static func addressText(_ bytes: [UInt8]) -> String? {
        let family: Int32
        switch bytes.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return nil
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil
                ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        }
    }

    /// The bytes of an IPv4 or IPv6 address; nil for a DNS name.
    static func addressBytes(_ name: String) -> [UInt8]? {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, name, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        if inet_pton(AF_INET6, name, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
