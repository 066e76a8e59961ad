package import ChaosCore
import Crypto
import Foundation
import SwiftASN1
package import X509

/// chaos's CA: the certificate and key that sign every leaf the proxy shows a client (ECDSA P-256, swift-certificates
/// and swift-crypto). `auto` is chaos's own, made on first use under `$CHAOS_HOME` (default `~/.chaos`), its key file
/// mode 0600; a team may bring its own (`ca: {cert, key}`).
package struct CertificateAuthority: Sendable {
    /// The CA certificate.
    package let certificate: Certificate
    /// Its private key.
    package let privateKey: Certificate.PrivateKey
    /// Where the certificate is (PEM).
    package let certificatePath: String

    /// The folder of chaos's own CA: `$CHAOS_HOME`, or `~/.chaos`.
    package static var home: String {
        if let home = ProcessInfo.processInfo.environment["CHAOS_HOME"], !home.isEmpty { return home }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".chaos").path
    }

    /// chaos's own CA under `home` (`ca.pem`, `ca-key.pem`; default ``home``), made now if missing.
    package static func own(home: String? = nil) throws -> CertificateAuthority {
        let folder = URL(fileURLWithPath: home ?? Self.home)
        let certificate = folder.appendingPathComponent("ca.pem")
        let key = folder.appendingPathComponent("ca-key.pem")
        if !FileManager.default.fileExists(atPath: certificate.path) || !FileManager.default.fileExists(atPath: key.path) {
            try make(certificate: certificate, key: key)
        }
        return try load(TLSSpec.KeyPair(cert: certificate.path, key: key.path))
    }

    /// A CA from PEM files; throws `badInput` naming the file for one that is not a CA certificate or a key that
    /// does not match it.
    package static func load(_ files: TLSSpec.KeyPair) throws -> CertificateAuthority {
        let certificate: Certificate
        let key: Certificate.PrivateKey
        do { certificate = try Certificate(pemEncoded: try String(contentsOfFile: files.cert, encoding: .utf8)) } catch {
            throw ChaosError.badInput("tls.ca.cert: '\(files.cert)' is not a PEM certificate (\(error))")
        }
        do { key = try Certificate.PrivateKey(pemEncoded: try String(contentsOfFile: files.key, encoding: .utf8)) } catch {
            throw ChaosError.badInput("tls.ca.key: '\(files.key)' is not a PEM private key (\(error))")
        }
        guard key.publicKey == certificate.publicKey else {
            throw ChaosError.badInput("tls.ca.key: '\(files.key)' is not the key of the certificate '\(files.cert)'")
        }
        guard let constraints = try? certificate.extensions.basicConstraints, case .isCertificateAuthority = constraints else {
            throw ChaosError.badInput("tls.ca.cert: '\(files.cert)' is not a CA certificate (basicConstraints CA:TRUE)")
        }
        return CertificateAuthority(certificate: certificate, privateKey: key, certificatePath: files.cert)
    }

    /// The certificate's SHA-256 fingerprint, `AB:CD:…`.
    package var fingerprint: String {
        SHA256.hash(data: derBytes).map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    /// The certificate, DER.
    package var derBytes: [UInt8] {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)  // a certificate we hold always serializes
        return serializer.serializedBytes
    }

    /// The certificate, PEM.
    package var pem: String { (try? certificate.serializeAsPEM().pemString) ?? "" }

    private static func make(certificate: URL, key: URL) throws {
        try FileManager.default.createDirectory(
            at: certificate.deletingLastPathComponent(),
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let signing = P256.Signing.PrivateKey()
        let privateKey = Certificate.PrivateKey(signing)
        let name = try DistinguishedName {
            OrganizationName("chaos")
            CommonName("chaos CA \(ProcessInfo.processInfo.hostName)")
        }
        let now = Date()
        let made = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: privateKey.publicKey,
            notValidBefore: now.addingTimeInterval(-3_600),
            notValidAfter: now.addingTimeInterval(10 * 365 * 86_400),
            issuer: name,
            subject: name,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: privateKey.publicKey)
            },
            issuerPrivateKey: privateKey
        )
        // The key first, created 0600 before a byte is in it.
        guard FileManager.default.createFile(atPath: key.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw ChaosError(.badInput, "cannot write chaos's CA key in \(key.deletingLastPathComponent().path)")
        }
        try Data(signing.pemRepresentation.utf8).write(to: key)
        try Data(try made.serializeAsPEM().pemString.utf8).write(to: certificate)
    }
}
