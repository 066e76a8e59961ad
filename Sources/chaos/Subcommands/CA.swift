import ArgumentParser
import ChaosCore
import ChaosTLS
import Foundation

/// `chaos ca`: chaos's own CA, which signs the leaves a `tls:` proxy shows its clients (made on first use).
struct CA: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Print chaos's CA (path and SHA-256 fingerprint), creating it if missing; export it; show how to trust it.",
        discussion: "The CA lives in $CHAOS_HOME (default ~/.chaos): ca.pem, and ca-key.pem (mode 0600), which never leaves it."
    )

    @Option(help: "Write the CA certificate (PEM) to this file.")
    var export: String?

    @Flag(help: "Print how to trust the CA in curl, Python, grpcio, Node, Java, an Android test build and an iOS simulator.")
    var hint = false

    func run() async throws {
        let authority = try CertificateAuthority.own()
        if let export {
            do { try Data(authority.pem.utf8).write(to: URL(fileURLWithPath: export)) } catch {
                throw ChaosError.badInput("--export: cannot write '\(export)': \(error.localizedDescription)")
            }
            print("wrote \(export)")
        }
        print("CA certificate: \(authority.certificatePath)")
        print("SHA-256 fingerprint: \(authority.fingerprint)")
        if hint { print(Self.hints(authority.certificatePath)) }
    }

    /// How to make a client under test trust the CA at `path`.
    static func hints(_ path: String) -> String {
        """

        Trust chaos's CA in the client under test (a test build only; never in production):
          curl       curl --cacert \(path) https://…
          Python     ssl.create_default_context(cafile="\(path)")   (or SSL_CERT_FILE=\(path))
          grpcio     grpc.ssl_channel_credentials(root_certificates=open("\(path)", "rb").read())
          Node       NODE_EXTRA_CA_CERTS=\(path) node app.js
          Java       keytool -importcert -alias chaos -file \(path) -keystore truststore.jks -storepass changeit -noprompt
                     then -Djavax.net.ssl.trustStore=truststore.jks
          Android    a debug build's res/xml/network_security_config.xml: <debug-overrides><trust-anchors>
                     <certificates src="@raw/chaos_ca"/></trust-anchors></debug-overrides> (copy \(path) to res/raw/chaos_ca.pem)
          iOS sim    xcrun simctl keychain booted add-root-cert \(path)
        An app that pins its server's certificate must allow this CA in its test build, or its handshakes fail
        (the report shows them as tls events).
        """
    }
}
