import Foundation
internal import Yams

extension TLSSpec {
    /// Reads a `tls:` block written as in a scenario (`{upstream: insecure, server_name: api.test}`; JSON is YAML
    /// too), for `--set proxies.NAME.tls=…`, the control API's `tls` field and `chaos proxy`'s flags. Files are
    /// relative to the working directory; `source` names the text in messages (`source:line:column`).
    package static func parse(_ text: String, source: String) throws -> TLSSpec {
        let node: Node
        do {
            guard let composed = try Yams.compose(yaml: text) else {
                throw ChaosError.badInput("empty tls block; expected e.g. {upstream: verify}", at: .init(file: source, line: 1, column: 1))
            }
            node = composed
        } catch let error as ChaosError {
            throw error
        } catch {
            throw ChaosError.badInput("not valid JSON or YAML: \(error)", at: .init(file: source, line: 1, column: 1))
        }
        let here = FileManager.default.currentDirectoryPath
        let reader = ScenarioReader(file: (here as NSString).appendingPathComponent(source))
        return try reader.tls(YAMLValue(node: node, file: source), "tls")
    }

    /// The block as a scenario writes it, as JSON (the control API shows a proxy's `tls` so).
    package var form: Form { Form(self) }

    /// A `tls:` block in the scenario's own shape: `ca` is `auto` or `{cert, key}`, `upstream` is `verify`,
    /// `insecure`, `cleartext` or a file, `alpn` is `mirror` or a list.
    package struct Form: Encodable, Sendable, Equatable {
        /// `auto` or the team CA's files.
        package var ca: KeyPairOrWord
        /// The leaf's name when the client sends no SNI.
        package var serverName: String?
        /// `verify`, `insecure`, `cleartext` or a roots file.
        package var upstream: String
        /// The client certificate for an mTLS upstream.
        package var clientCert: KeyPair?
        /// `mirror` or the protocols.
        package var alpn: ListOrWord

        init(_ spec: TLSSpec) {
            ca = spec.ca.map(KeyPairOrWord.pair) ?? .word("auto")
            serverName = spec.serverName
            switch spec.upstream {
            case .verify: upstream = "verify"
            case .insecure: upstream = "insecure"
            case .cleartext: upstream = "cleartext"
            case .roots(let file): upstream = file
            }
            clientCert = spec.clientCert
            alpn = spec.alpn.map(ListOrWord.list) ?? .word("mirror")
        }

        enum CodingKeys: String, CodingKey {
            case ca
            case serverName = "server_name"
            case upstream
            case clientCert = "client_cert"
            case alpn
        }

        /// A word (`auto`) or a key pair.
        package enum KeyPairOrWord: Encodable, Sendable, Equatable {
            case word(String)
            case pair(KeyPair)
            package func encode(to encoder: any Encoder) throws {
                switch self {
                case .word(let word):
                    var c = encoder.singleValueContainer()
                    try c.encode(word)
                case .pair(let pair): try pair.encode(to: encoder)
                }
            }
        }

        /// A word (`mirror`) or a list.
        package enum ListOrWord: Encodable, Sendable, Equatable {
            case word(String)
            case list([String])
            package func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                switch self {
                case .word(let word): try c.encode(word)
                case .list(let list): try c.encode(list)
                }
            }
        }
    }
}
