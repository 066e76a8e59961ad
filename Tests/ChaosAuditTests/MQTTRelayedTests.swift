import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// MQTT audited in lockstep (a read the relay writes whole from its own buffer is decoded once, and its protocol
/// events taken as read and as written) gives exactly what the same traffic gives when every write is a copy of its
/// own: random traffic of a publisher and a subscriber through a broker, QoS 0, 1 and 2 with their acknowledgements,
/// DUP and retained packets, keepalives, MQTT 5 topic aliases, payloads without a seq, gaps, cut into random reads,
/// each read written whole (shared buffer), in pieces, or not yet, with acknowledgements, a reset mid-stream and a
/// packet half read at the end, compared whole, for the topic as the stream, the client id, and the envelope.
@Suite("MQTT relayed: a read written whole from its own buffer audits as when written as a copy")
struct MQTTRelayedTests {
    typealias W = MQTTWire

    /// The specs compared: the topic named by the decoder, the client id, and the envelope (a path into the payload).
    static let specs = [
        ProtocolSpec(framing: .mqtt, stream: "topic", ignore: ["type": ["hello"]]),
        ProtocolSpec(framing: .mqtt, stream: "client-id"),
        ProtocolSpec(framing: .mqtt, seq: "data.seq", stream: "topic"),
    ]

    /// The byte streams (upstream, downstream) of a publisher (connection 1) and a subscriber (connection 2).
    static func traffic(_ generator: inout SeededGenerator, level: UInt8) -> [[[UInt8]]] {
        var publisher = [W.connect("phone", level: level), W.connack(level: level)]
        var subscriber = [W.connect("dash", level: level, clean: false) + W.subscribe("fleet/#"), W.connack(level: level) + W.suback()]
        var seqs = [1, 1]
        var aliased = [false, false]
        var id: UInt16 = 0
        for _ in 0..<200 {
            let topic = Int.random(in: 0...1, using: &generator)
            let qos = UInt8.random(in: 0...2, using: &generator)
            id += 1
            let roll = Int.random(in: 0..<20, using: &generator)
            let pad = String(repeating: "x", count: Int.random(in: 0...60, using: &generator))
            let payload = roll == 0 ? #"{"type":"hello"}"# : #"{"seq":\#(seqs[topic]),"pad":"\#(pad)"}"#
            if roll != 0 { seqs[topic] += roll == 1 ? 2 : 1 }
            // An MQTT 5 publisher names a topic by its alias now and then, once the alias is set.
            var properties: [UInt8] = []
            var name = "fleet/\(topic)"
            if level == 5, Bool.random(using: &generator) {
                properties = [0x23, 0, UInt8(topic + 1)]
                if aliased[topic] { name = "" }
                aliased[topic] = true
            }
            publisher[0] += W.publish(name, payload, qos: qos, id: id, dup: roll == 2, level: level, properties: properties)
            if qos == 1 { publisher[1] += W.puback(id) }
            if qos == 2 {
                publisher[1] += W.pubrec(id)
                publisher[0] += W.pubrel(id)
                publisher[1] += W.pubcomp(id)
            }
            if Int.random(in: 0..<15, using: &generator) != 0 {
                subscriber[1] += W.publish("fleet/\(topic)", payload, qos: qos, id: id, retain: roll == 3, level: level)
                if qos == 1 { subscriber[0] += W.puback(id) }
                if qos == 2 {
                    subscriber[0] += W.pubrec(id)
                    subscriber[1] += W.pubrel(id)
                    subscriber[0] += W.pubcomp(id)
                }
            }
            if roll == 4 {
                publisher[0] += W.pingreq
                publisher[1] += W.pingresp
            }
        }
        publisher[0] += W.disconnect(reason: level == 5 ? 0 : nil)
        return [publisher, subscriber]
    }

    /// Audits one scripted run of `seed` under `spec`, with writes sharing the read's buffer (`shared`) or always copies.
    static func run(seed: UInt64, spec: ProtocolSpec, shared: Bool) throws -> AuditResult {
        var generator = SeededGenerator(seed: seed)
        let streams = traffic(&generator, level: seed.isMultiple(of: 2) ? 5 : 4)
        return try RelayedTraffic.audit(streams, spec: spec, seed: seed, shared: shared, generator: &generator)
    }

    @Test(
        "random MQTT traffic of 36 seeds and three specs: the whole AuditResult is equal with shared buffers and with copies",
        arguments: Array(UInt64(1)...36)
    )
    func sharedEqualsCopies(seed: UInt64) throws {
        let spec = Self.specs[Int(seed % 3)]
        let shared = try Self.run(seed: seed, spec: spec, shared: true)
        let copies = try Self.run(seed: seed, spec: spec, shared: false)
        #expect(shared == copies, "seed \(seed): totals \(shared.totals) vs \(copies.totals); messages \(shared.messages) vs \(copies.messages)")
        let events = try #require(shared.protocolEvents)
        #expect(
            shared.totals.sent > 100 && shared.totals.delivered > 100 && events[counter: "mqttPubrels"] > 0 && events.pings > 0,
            "the traffic exercises the kinds: \(shared.totals) \(events)"
        )
        // A subscriber reset early (every third seed) may have had no retained message yet.
        #expect(events[counter: "mqttRetained"] > 0 || seed.isMultiple(of: 3), "retained PUBLISHes: \(events)")
        if spec.stream == "topic" {
            let names = Set(shared.streams.map(\.stream))
            #expect(names == ["fleet/0", "fleet/1"], "the topics name the streams: \(names)")
        }
    }
}
