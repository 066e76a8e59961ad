import Foundation
import Testing

/// MQTT over TLS and over WebSocket through chaos, with real third-party peers: Debian's `mosquitto` with a TLS
/// listener (a certificate of its own CA, PyPI `trustme`) or a WebSocket listener, and PyPI `paho-mqtt` clients
/// (mqtt_pair.py `--tls-ca` trusting chaos's CA, or `--websocket`), one publisher and two subscribers on persistent
/// sessions at QoS 1 through resets and a partition. The audit of the decrypted (or unframed) MQTT equals the
/// clients' own logs, per subscriber, and the run passes.
@Suite("MQTT over TLS and WebSocket: the audit equals the clients' own logs, per subscriber", .serialized, .timeLimit(.minutes(3)))
struct MQTTTransportPairTests {
    /// A pair-and-protocol block like MQTTPairTests' (three clients, mosquitto with `configuration` or `broker` run as it
    /// is), for `flags`.
    static func scenario(listen: Int, upstream: Int, configuration: String, flags: String, tls: String = "", broker: String? = nil) -> String {
        let client = "--connect 127.0.0.1:{listen.port} --qos 1 --publish-for 8 \(flags)"
        return """
            name: mqtt-transport
            duration: 14s
            seed: 9
            proxies:
              - {name: broker, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"\(tls)}
            \(MQTTPairTests.pairAndProtocol(configuration: configuration, client: client, broker: broker))
            faults:
              - disconnect: {at: 2s, mode: reset}
              - partition: {at: 4s, for: 1500ms, direction: both}
              - disconnect: {at: 7s, mode: reset}
            expect:
              lost: 0
            """
    }

    /// Each stream of the run equals what its clients logged (at least `floor` seqs each), nothing lost, no protocol
    /// error; whether all of that held.
    static func judge(_ run: (folder: String, scenario: String, status: Int32), floor: Int = 50) throws -> Bool {
        let fine = try MQTTPairTests.passesWithLogs(run, floor: floor)
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let events = try #require(json["protocol_events"] as? [String: Any])
        let connects = events["mqtt_connects"] as? Int ?? 0
        #expect(connects >= 6, "a CONNECT per client, then one after each cut: \(events)")
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        // paho closes its socket without a TLS close_notify, which chaos reports as it is (an unclean shutdown by the
        // client): after its DISCONNECT, once per client at the run's end, and when it gives a connection up inside a
        // fault (s79h1, beside a CPU hog: a client's keepalive gave up in the partition); any other TLS error is one.
        let tlsAnomalies = (json["anomalies"] as? [[String: Any]] ?? []).filter { $0["class"] as? String == "tls" }
        let tls = tlsAnomalies.compactMap { $0["detail"] as? String }
        let unexpected = tls.filter { !($0.hasPrefix("the client") && $0.hasSuffix("TLS error: uncleanShutdown")) }
        let outsideFaults = tlsAnomalies.filter { $0["fault_active"] as? Bool != true }.count
        let clean = counts["protocol"] == nil && counts["undecodable"] == nil && unexpected.isEmpty && outsideFaults <= 3
        #expect(clean, "no protocol or TLS errors: \(counts), \(tls) (\(run.folder))")
        return fine && connects >= 6 && clean
    }

    @Test("MQTT over TLS (mosquitto's own certificate, paho trusting chaos's CA): counts equal the clients' logs; keys.log holds the secrets")
    func overTLS() async throws {
        let home = try TLSPairTests.folder()
        let run = try await ThirdPartyPairRun.run("mqtt-tls", capture: false, environment: ["CHAOS_HOME": home]) { listen, upstream in
            let configuration = try! MQTTPairTests.brokerConfiguration(
                port: upstream,
                inflightLimit: 0,
                extra: "certfile \(home)/server.pem\nkeyfile \(home)/server.pem\n"
            )
            return Self.scenario(
                listen: listen,
                upstream: upstream,
                configuration: configuration,
                flags: "--tls-ca \(home)/ca.pem",
                tls: ", tls: {upstream: \(home)/upstream-ca.pem}"
            )
        }
        // paho's publish() waits while its network thread reconnects, and over TLS a reconnect into the partition holds
        // it for the handshake: a fresh-clone run's publisher sent 37 in its 8 s.
        let fine = try Self.judge(run, floor: 20)
        let keys = try String(contentsOfFile: "\(run.folder)/keys.log", encoding: .utf8)
        #expect(keys.components(separatedBy: "CLIENT_TRAFFIC_SECRET_0 ").count - 1 >= 6, "\(keys.prefix(400))")
        if fine { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path) }
    }

    /// Mosquitto 2.0.11's websockets listener binds every interface whatever its address says (libwebsockets), which a
    /// test here must not do; PyPI `amqtt` (the second broker of MQTTPairTests, in its own venv) binds 127.0.0.1.
    /// Whatever it delivers or drops, each stream equals the clients' logs and each subscriber's losses its log's holes.
    @Test(
        "MQTT over WebSocket (amqtt's ws listener, paho's websockets transport): each stream equals the clients' logs, per subscriber; an upgrade per connection"
    )
    func overWebSocket() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: MQTTPairTests.amqtt),
            "amqtt is not installed at \(MQTTPairTests.amqtt): run make deps"
        )
        let run = try await ThirdPartyPairRun.run("mqtt-ws", capture: false) { listen, upstream in
            Self.scenario(
                listen: listen,
                upstream: upstream,
                configuration: "",
                flags: "--websocket",
                broker: try! MQTTPairTests.amqttBroker(port: upstream, listener: "ws")
            )
        }
        let fine = try MQTTPairTests.lossesEqualLogs(run)
        let json = try DeliveredMeansAcknowledgedTests.reportJSON(run.folder)
        let events = try #require(json["protocol_events"] as? [String: Any])
        let upgrades = events["mqtt_web_socket_upgrades"] as? Int ?? 0
        #expect(upgrades >= 6 && upgrades == events["mqtt_connects"] as? Int, "an upgrade per connection: \(events)")
        let counts = json["anomaly_counts"] as? [String: Any] ?? [:]
        #expect(counts["protocol"] == nil && counts["undecodable"] == nil, "no protocol errors: \(counts) (\(run.folder))")
        if fine && upgrades >= 6 { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: run.folder).deletingLastPathComponent().path) }
    }
}
