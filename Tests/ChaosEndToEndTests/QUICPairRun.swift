import Foundation

/// The aioquic pair of Tests/Fixtures/pairs/quic_pair.py run by `chaos run` through one `udp://` proxy with
/// `protocol: {transport: quic}`: the scenario the QUIC pair suites share, and the run with a key log of its own.
enum QUICPairRun {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/pairs/quic_pair.py").path

    /// What one suite's scenario says: the run's name, length and seed, the proxy's name, the server's and the two
    /// clients' flags beside the usual ones (`client` includes the messages and their pace), the protocol's lines
    /// besides its transport and key log, and the faults' and expectations' lines.
    struct Scenario {
        var name: String
        var duration: String
        var seed: Int
        var proxy = "quic"
        var server = ""
        var client: String
        var protocolLines = ["framing: lines"]
        var faults: [String]
        var expect: [String]

        /// The YAML of a run on `listen` and `upstream`, both ends writing the key log `keys`.
        func yaml(listen: Int, upstream: Int, keys: String) -> String {
            let serverFlags = server.isEmpty ? "" : "\(server) "
            return """
                name: \(name)
                duration: \(duration)
                seed: \(seed)
                proxies:
                  - {name: \(proxy), listen: "udp://127.0.0.1:\(listen)", upstream: "udp://127.0.0.1:\(upstream)"}
                pair:
                  server:
                    run: python3 \(QUICPairRun.pair) server \(serverFlags)--listen 127.0.0.1:{upstream.port} --dir {run_dir}/server --log {run_dir}/server.jsonl --keylog \(keys)
                    stop_grace: 1s
                  client:
                    run: python3 \(QUICPairRun.pair) client \(client) --connect 127.0.0.1:{listen.port} --ca {run_dir}/server/ca.pem --log {run_dir}/client-{index}.jsonl --keylog \(keys) --name c{index} --timeout 30 --stay
                    count: 2
                    ready: connected
                    stop_grace: 1s
                protocol:
                  transport: quic
                  keylog: \(keys)
                \(protocolLines.map { "  " + $0 }.joined(separator: "\n"))
                faults:
                \(faults.map { "  - " + $0 }.joined(separator: "\n"))
                expect:
                \(expect.map { "  " + $0 }.joined(separator: "\n"))
                """
        }
    }

    /// Runs `scenario` on free ports with a key log of its own (removed after, unless `tcpdump`); the run folder, the
    /// scenario file and the exit status. With `tcpdump`, a `tcpdump -i lo` of both UDP legs goes to `lo.pcap` beside
    /// the run folder, and the key log is kept (`keys`) for `chaos audit` of it.
    static func run(
        _ scenario: Scenario,
        tcpdump: Bool = false
    ) async throws -> (folder: String, scenario: String, status: Int32, keys: String, tcpdump: String?) {
        let keys = FileManager.default.temporaryDirectory.appendingPathComponent("\(scenario.name)-keys-\(UUID().uuidString).log").path
        defer { if !tcpdump { try? FileManager.default.removeItem(atPath: keys) } }
        let run = try await ThirdPartyPairRun.run(scenario.name, capture: false, udpDump: tcpdump) {
            scenario.yaml(listen: $0, upstream: $1, keys: keys)
        }
        let dump = URL(fileURLWithPath: run.folder).deletingLastPathComponent().appendingPathComponent("lo.pcap").path
        return (run.folder, run.scenario, run.status, keys, tcpdump ? dump : nil)
    }
}
