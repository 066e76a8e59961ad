package import ChaosCore

/// `framing: mqtt`: MQTT 3.1, 3.1.1 and 5.0 over TCP (or TLS). One message is one PUBLISH: upstream what a client
/// publishes to the broker, downstream what the broker forwards to a subscriber. `format: json` reads the payload's
/// keys (`seq: seq`); a path that names the packet's own fields (`topic`, `qos`, `dup`, `retain`, `packet_id`) or its
/// payload (`data.KEY`) makes the body a JSON envelope (`{"topic":"fleet/7","qos":1,…,"data":{…}}`) and every path is
/// read there, a bare `KEY` in the payload as before. `stream: topic` (the default) makes each topic a stream;
/// `stream: client-id` the connection's client id (its CONNECT's, or the one its CONNACK assigned). MQTT 5 topic
/// aliases are resolved. A QoS 2 message counts at its PUBREL (see ``MQTTReleases``). PINGREQ and PINGRESP are keepalives (their round trips measured); CONNECT, CONNACK (its
/// return or reason code, session present), SUBSCRIBE, the acknowledgements of QoS 1 and 2, DUP and retained
/// PUBLISH packets and DISCONNECT (its reason code) are counted.
package enum MQTTProtocol: ProtocolPlugin {
    package static let names = ["mqtt"]
    package static var defaultStream: String { "topic" }
    package static var frames: String? { "mqtt" }
    /// `topics: [fleet/+/position]`: the topic filters whose PUBLISH packets are messages (default every topic); the
    /// others are counted (`mqtt_unaudited_publishes`), not audited.
    package static var listOptionKeys: [String] { [topicsKey] }
    static let topicsKey = "topics"
    package static func listOptionProblem(_ key: String, _ item: String) -> String? { MQTTTopicFilter.problem(item) }

    /// `mqtt-disconnect`: the broker's DISCONNECT (MQTT 5, with `reason`) to the client at the next packet boundary,
    /// as a broker going down sends it; nothing more passes either way; the connection is closed after `grace`. An
    /// MQTT 3.1.1 broker sends no DISCONNECT: the client gets none, only the close.
    package static let faults = [
        ProtocolFaultDeclaration(
            kind: "mqtt-disconnect",
            summary: "the broker's DISCONNECT (MQTT 5, with a reason code) at the next packet boundary, then the connection closed",
            fields: [
                .init(
                    "reason",
                    .integer(
                        range: 0...255,
                        default: 0x8B,
                        sendable: serverDisconnectReasons,
                        meaning: "a reason code a server may send in DISCONNECT (0x00, 0x80-0x83, 0x87, 0x89, 0x8B, 0x8D-0x90, 0x93-0xA2)"
                    )
                ),
                .init("grace", .duration(default: .seconds(Int64(1)))),
            ]
        )
    ]

    /// The DISCONNECT reason codes a server may send (MQTT 5.0 section 3.14.2.1; 0x04 is the client's alone).
    static let serverDisconnectReasons: [ClosedRange<Int64>] = [
        0...0, 0x80...0x83, 0x87...0x87, 0x89...0x89, 0x8B...0x8B, 0x8D...0x90, 0x93...0xA2,
    ]

    package static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking { MQTTBoundaryTracker() }

    /// `mqtt-disconnect`: to the client, a DISCONNECT with the reason code when its CONNECT asked for MQTT 5 (none
    /// for 3.1 and 3.1.1, whose brokers send none); toward both, silence once a packet ends.
    package static func faultFrames(_ fault: ProtocolFault, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames? {
        guard fault.kind == "mqtt-disconnect", let reason = fault.integer("reason"), let grace = fault.duration("grace")
        else { return nil }
        let disconnect: [UInt8] = (client as? MQTTBoundaryTracker)?.protocolLevel == 5 ? [0xE0, 2, UInt8(truncatingIfNeeded: reason), 0] : []
        return FaultFrames(
            toServer: .init(frame: [], silenceAfter: true),
            toClient: .init(frame: disconnect, silenceAfter: true),
            grace: grace
        )
    }

    package static let counters = [
        ProtocolCounter("mqttConnects", "CONNECTs"), ProtocolCounter("mqttCleanSessions", "clean sessions"),
        ProtocolCounter("mqttSessionsPresent", "sessions present"), ProtocolCounter("mqttSubscribes", "SUBSCRIBEs"),
        ProtocolCounter("mqttPubacks", "PUBACKs"), ProtocolCounter("mqttPubrecs", "PUBRECs"),
        ProtocolCounter("mqttPubrels", "PUBRELs"), ProtocolCounter("mqttPubcomps", "PUBCOMPs"),
        ProtocolCounter("mqttUnmatchedPubrels", "PUBRELs of a QoS 2 PUBLISH not read"),
        ProtocolCounter("mqttDuplicates", "DUP PUBLISHes"), ProtocolCounter("mqttRetained", "retained PUBLISHes to subscribers"),
        ProtocolCounter("mqttWebSocketUpgrades", "upgrades to MQTT over WebSocket"),
        ProtocolCounter("mqttWebSocketRefusals", "WebSocket upgrades refused"),
        ProtocolCounter("mqttUnauditedPublishes", "PUBLISHes to topics outside `topics:`"),
    ]
    package static let counterFamilies = [
        ProtocolCounter("mqttConnacks", "CONNACK codes", note: "0x00: accepted"),
        ProtocolCounter("mqttDisconnects", "DISCONNECT reason codes", note: "MQTT 3.1.1's DISCONNECT has none: 0x00"),
    ]

    /// The stream key that names the connection's client id.
    package static let clientIDKey = "client-id"
    /// The packet's own fields an envelope holds beside its payload (`data`).
    static let envelopeFields: Set<String> = ["topic", "qos", "dup", "retain", "packet_id"]

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        MQTTFramer(
            envelope: namesPacketFields(spec),
            streamByTopic: streamsByTopic(spec),
            releases: MQTTReleases(),
            topics: spec.lists?[topicsKey].map { $0.compactMap(MQTTTopicFilter.init) }
        )
    }

    /// Whether a path of `spec` names the packet's own fields or its payload (`topic`, `data.KEY`) where the topic
    /// is not simply the stream: PUBLISH packets are then handed over as JSON envelopes.
    static func namesPacketFields(_ spec: ProtocolSpec) -> Bool {
        guard spec.format == .json else { return false }
        var paths = spec
        if streamsByTopic(spec) { paths.stream = nil }
        return paths.fieldPaths.contains { envelopeFields.contains($0) || $0 == "data" || $0.hasPrefix("data.") }
    }

    /// Whether every message's stream is its PUBLISH's topic (`stream: topic`, the default, for both directions): the
    /// decoder then hands the topic over with each payload, which needs no envelope and no field read.
    static func streamsByTopic(_ spec: ProtocolSpec) -> Bool {
        spec.stream == "topic" && spec.upstream?.stream == nil && spec.downstream?.stream == nil
    }

    /// The envelope's path for a path as the scenario writes it: the packet's fields at the top, everything else in
    /// its payload; `client-id` read from the connection.
    static func envelopePath(_ path: String, envelope: Bool) -> String {
        if path == clientIDKey { return "header:" + clientIDKey }
        guard envelope else { return path }
        if envelopeFields.contains(path) { return "/" + path }
        return ProtocolSpec.envelopeDataPath(path)
    }

    package static func fieldSpec(_ spec: ProtocolSpec) -> ProtocolSpec {
        let envelope = namesPacketFields(spec)
        var fields = spec.rewritingPaths { envelopePath($0, envelope: envelope) }
        // The decoder names each message's stream (its topic): no field of the body does.
        if streamsByTopic(spec) { fields.stream = nil }
        return fields
    }

    /// Packets after a CONNECT (MQTT 5, client id `c1`) and its CONNACK, the fuzzer's bytes both ways.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        let connect: [UInt8] = [0x10, 15, 0, 4] + Array("MQTT".utf8) + [5, 0b10, 0, 60, 0, 0, 2] + Array("c1".utf8)
        let connack: [UInt8] = [0x20, 3, 0, 0, 0]
        return FuzzSetup(
            spec: ProtocolSpec(framing: .mqtt, stream: "topic", maxMessage: 4096),
            prelude: [.read(.client, connect), .written(.server, connect), .read(.server, connack), .written(.client, connack)],
            input: input
        )
    }
}

/// A new ``MQTTSession`` per connection, all of them sharing one ``MQTTReleases``; `envelope`: PUBLISH packets are
/// handed over as JSON envelopes; `streamByTopic`: each with its topic as its stream.
struct MQTTFramer: ProtocolFramer {
    let envelope: Bool
    let streamByTopic: Bool
    let releases: MQTTReleases
    /// The topic filters audited; nil: every topic.
    let topics: [MQTTTopicFilter]?

    /// The proxy's one frame of its own, `mqtt-disconnect`'s DISCONNECT, is the last thing written on its leg (silence
    /// follows it): every message written before it is a read one at the same offset.
    var proxyWritesOnlyRelayedBytes: Bool { true }

    func makeSession() -> any ProtocolSession {
        MQTTSession(envelope: envelope, streamByTopic: streamByTopic, releases: releases, topics: topics)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: mqtt`.
    package static let mqtt = Self(name: MQTTProtocol.name)
}
