import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The audit over MQTT traffic events through a broker: a publisher's PUBLISHes are the topic's upstream stream, and
/// what the broker writes to each subscriber is that subscriber's own copy of the topic downstream (named by its
/// client id), so a message fanned out to two subscribers is two deliveries, not a duplicate, and a subscriber that
/// misses one loses it alone.
@Suite("MQTT audit")
struct MQTTAuditTests {
    typealias W = MQTTWire
    static let spec = ProtocolSpec(framing: .mqtt, stream: "topic")

    static func relay(_ s: inout TrafficScript, _ id: ConnectionID, _ bytes: [UInt8], _ direction: Direction) {
        s.sendBytes(id, direction, bytes)
        s.deliverBytes(id, direction, bytes)
    }

    /// Opens connection `id` for client `clientID`: its CONNECT and the broker's CONNACK.
    static func open(_ s: inout TrafficScript, _ id: ConnectionID, _ clientID: String) {
        s.open(id)
        relay(&s, id, W.connect(clientID), .upstream)
        relay(&s, id, W.connack(), .downstream)
    }

    static func audit(_ s: TrafficScript, _ spec: ProtocolSpec = spec) throws -> AuditResult {
        let engine = try AuditEngine(spec: spec)
        engine.ingest(s.events)
        return engine.finish()
    }

    static func stream(_ result: AuditResult, _ direction: Direction, receiver: String? = nil) -> DeliveryCounts? {
        result.streams.first { $0.stream == "fleet/7" && $0.direction == direction && $0.receiver == receiver }?.counts
    }

    @Test("one publisher, two subscribers: each subscriber's copy is its own stream; one that misses a message loses it alone")
    func fanOut() throws {
        var s = TrafficScript()
        Self.open(&s, 1, "phone")
        Self.open(&s, 2, "dash-a")
        Self.open(&s, 3, "dash-b")
        for id: ConnectionID in [2, 3] {
            Self.relay(&s, id, W.subscribe("fleet/#"), .upstream)
            Self.relay(&s, id, W.suback(), .downstream)
        }
        for seq in 1...5 {
            Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .upstream)
            Self.relay(&s, 1, W.puback(UInt16(seq)), .downstream)
            Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .downstream)
            if seq != 3 { Self.relay(&s, 3, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .downstream) }
        }
        for id: ConnectionID in [1, 2, 3] { s.close(id) }
        let result = try Self.audit(s)
        let published = try #require(Self.stream(result, .upstream))
        let a = try #require(Self.stream(result, .downstream, receiver: "dash-a"))
        let b = try #require(Self.stream(result, .downstream, receiver: "dash-b"))
        #expect(published.sent == 5 && published.ok == 5 && published.duplicated == 0)
        #expect(a.ok == 5 && a.lost == 0 && a.duplicated == 0 && a.redelivered == 0)
        #expect(b.ok == 4 && b.lost == 1 && b.duplicated == 0)
        #expect(Self.stream(result, .downstream) == nil, "no downstream stream without a receiver")
        let lost = result.anomalies.filter { $0.kind == .lost }
        #expect(lost.count == 1 && lost.first?.receiver == "dash-b" && lost.first?.fromSeq == 3)
        // The broker had seq 3 (the publisher's stream delivered it) and never wrote it to dash-b: lost at the server.
        var atServer = LossPlacement()
        atServer.atServer = 1
        #expect(result.streams.first { $0.receiver == "dash-b" }?.lostWhere == atServer)
        #expect(lost.first?.detail == "1 seq never delivered (at the server 1)")
        let events = try #require(result.protocolEvents)
        #expect(events[counter: "mqttConnects"] == 3 && events[counter: "mqttSubscribes"] == 2 && events[counter: "mqttPubacks"] == 5)
    }

    @Test("each stream carries the weakest QoS of its messages as its contract")
    func contracts() throws {
        var s = TrafficScript()
        Self.open(&s, 1, "phone")
        Self.open(&s, 2, "dash-a")
        Self.relay(&s, 2, W.subscribe("fleet/#"), .upstream)
        Self.relay(&s, 2, W.suback(), .downstream)
        for seq in 1...4 {
            // The publisher sends at QoS 0; dash-a gets 1, 2 and 4.
            Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 0), .upstream)
            if seq != 3 { Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 0), .downstream) }
        }
        Self.relay(&s, 1, W.publish("other", #"{"seq":1}"#, qos: 1, id: 9), .upstream)
        Self.relay(&s, 1, W.publish("other", #"{"seq":2}"#, qos: 2, id: 10), .upstream)
        Self.relay(&s, 1, W.pubrel(10), .upstream)
        for id: ConnectionID in [1, 2] { s.close(id) }
        let result = try Self.audit(s)
        let contracts = Dictionary(uniqueKeysWithValues: result.streams.map { ("\($0.stream) \($0.receiver ?? "-")", $0.contract) })
        #expect(contracts["fleet/7 -"] == .atMostOnce && contracts["fleet/7 dash-a"] == .atMostOnce)
        #expect(contracts["other -"] == .atLeastOnce, "QoS 1 and 2 mixed: the weaker")
        #expect(Self.stream(result, .downstream, receiver: "dash-a")?.lost == 1)
    }

    @Test("a subscriber that subscribes while the topic is under way is owed what comes after: nothing before is lost")
    func lateSubscriber() throws {
        var s = TrafficScript()
        Self.open(&s, 1, "phone")
        for seq in 1...3 { Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#), .upstream) }
        Self.open(&s, 2, "dash-a")
        Self.relay(&s, 2, W.subscribe("fleet/#"), .upstream)
        Self.relay(&s, 2, W.suback(), .downstream)
        for seq in 4...6 {
            Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#), .upstream)
            if seq != 5 { Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":\#(seq)}"#), .downstream) }
        }
        for id: ConnectionID in [1, 2] { s.close(id) }
        let result = try Self.audit(s)
        let a = try #require(Self.stream(result, .downstream, receiver: "dash-a"))
        #expect(a.ok == 2 && a.lost == 1, "seq 5 lost, 1-3 not owed: \(a)")
        #expect(result.anomalies.first { $0.kind == .lost }?.fromSeq == 5)
    }

    /// A fresh-clone run under a CPU hog (s48bh3) counted one lost for a subscriber that joined as a PUBLISH reached
    /// the broker: the broker's TCP took it, and the broker handled it, before the subscription, but the proxy saw its
    /// acknowledgement only after the SUBACK.
    @Test("a PUBLISH written to the broker before the SUBACK, acknowledged after it, is not owed to the new subscriber")
    func publishAcknowledgedAfterTheSuback() throws {
        var s = TrafficScript()
        Self.open(&s, 1, "phone")
        Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":1}"#), .upstream)
        Self.open(&s, 2, "dash-a")
        Self.relay(&s, 2, W.subscribe("fleet/#"), .upstream)
        let second = W.publish("fleet/7", #"{"seq":2}"#)
        s.sendBytes(1, .upstream, second)
        s.writeBytes(1, .upstream, second)
        Self.relay(&s, 2, W.suback(), .downstream)
        s.acknowledge(1, .upstream)
        Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":3}"#), .upstream)
        Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":3}"#), .downstream)
        for id: ConnectionID in [1, 2] { s.close(id) }
        let result = try Self.audit(s)
        let a = try #require(Self.stream(result, .downstream, receiver: "dash-a"))
        #expect(a.ok == 1 && a.lost == 0, "seq 2 not owed: \(a)")
        #expect(try #require(Self.stream(result, .upstream)).ok == 3)
    }

    /// Publisher `phone` on connection 1, subscriber `dash-a` on connection 2, its SUBSCRIBE answered.
    static func publisherAndSubscriber() -> TrafficScript {
        var s = TrafficScript()
        open(&s, 1, "phone")
        open(&s, 2, "dash-a")
        relay(&s, 2, W.subscribe("fleet/#"), .upstream)
        relay(&s, 2, W.suback(), .downstream)
        return s
    }

    @Test("where a subscriber's losses died: cut on the way to it, or never delivered to the broker by the publisher")
    func lossPlacement() throws {
        var s = Self.publisherAndSubscriber()
        for seq in 1...2 {
            Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .upstream)
            Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .downstream)
        }
        // Seq 3 reaches the broker and is read from it for dash-a, whose connection is cut before it is written.
        Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":3}"#, qos: 1, id: 3), .upstream)
        s.sendBytes(2, .downstream, W.publish("fleet/7", #"{"seq":3}"#, qos: 1, id: 3))
        s.close(2, .reset)
        // Seq 4 is read from the publisher and never reaches the broker: its connection is cut too.
        s.sendBytes(1, .upstream, W.publish("fleet/7", #"{"seq":4}"#, qos: 1, id: 4))
        s.close(1, .reset)
        Self.open(&s, 3, "dash-a")
        Self.relay(&s, 3, W.publish("fleet/7", #"{"seq":5}"#, qos: 1, id: 5), .downstream)
        s.close(3)
        let result = try Self.audit(s)
        let a = try #require(result.streams.first { $0.receiver == "dash-a" })
        var expected = LossPlacement()
        expected.serverToReceiver = 1
        expected.producerToServer = 1
        #expect(a.counts.lost == 2 && a.lostWhere == expected, "\(a)")
    }

    @Test("a subscriber that stops getting messages has lost the rest of what the publisher sent, at the broker")
    func tailLoss() throws {
        var s = Self.publisherAndSubscriber()
        for seq in 1...6 {
            Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .upstream)
            if seq <= 2 { Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .downstream) }
        }
        for id: ConnectionID in [1, 2] { s.close(id) }
        let result = try Self.audit(s)
        let a = try #require(result.streams.first { $0.receiver == "dash-a" })
        var atServer = LossPlacement()
        atServer.atServer = 4
        #expect(a.counts.ok == 2 && a.counts.lost == 4 && a.lostWhere == atServer, "\(a)")
        let lost = result.anomalies.first { $0.kind == .lost }
        #expect(lost?.fromSeq == 3 && lost?.toSeq == 6)
    }

    @Test("a subscriber that comes back with the same client id continues its own stream: a resent message is redelivered")
    func subscriberReconnects() throws {
        var s = TrafficScript()
        Self.open(&s, 1, "dash-a")
        for seq in 1...3 { Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .downstream) }
        s.close(1, .reset)
        Self.open(&s, 2, "dash-a")
        for seq in 3...5 {
            Self.relay(&s, 2, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq), dup: seq == 3), .downstream)
        }
        s.close(2)
        let result = try Self.audit(s)
        let a = try #require(Self.stream(result, .downstream, receiver: "dash-a"))
        #expect(a.ok == 5 && a.redelivered == 1 && a.lost == 0)
        #expect(result.protocolEvents?[counter: "mqttDuplicates"] == 1)
    }

    @Test(
        "a retained message sent again on a re-subscription (QoS 1 and 2) is counted as retained, not redelivered; one the receiver never had is a delivery, and its live copy the retained extra",
        arguments: [UInt8(1), 2]
    )
    func retainedAgain(qos: UInt8) throws {
        var s = TrafficScript()
        /// The broker's PUBLISH of `seq` to dash-a on `id` (with its PUBREL at QoS 2, which hands it over).
        func publish(_ id: ConnectionID, _ seq: Int, retain: Bool = false, packet: UInt16) {
            Self.relay(&s, id, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: qos, id: packet, retain: retain), .downstream)
            if qos == 2 { Self.relay(&s, id, W.pubrel(packet), .downstream) }
        }
        Self.open(&s, 1, "dash-a")
        // Subscribed after the publisher's first message: the broker sends it as retained (a delivery: not had before).
        publish(1, 1, retain: true, packet: 1)
        for seq in 2...3 { publish(1, seq, packet: UInt16(seq)) }
        s.close(1, .reset)
        Self.open(&s, 2, "dash-a")
        // The re-subscription: a retained message it had (3), one it had not yet (6: ahead of what the broker still
        // queued for it), then the queued and live ones; 6's live copy is the retained extra, and nothing is reordered.
        publish(2, 3, retain: true, packet: 4)
        publish(2, 6, retain: true, packet: 5)
        for seq in 4...6 { publish(2, seq, packet: UInt16(seq + 2)) }
        // A live message written twice stays a duplicate.
        publish(2, 6, packet: 8)
        s.close(2)
        let result = try Self.audit(s)
        let a = try #require(Self.stream(result, .downstream, receiver: "dash-a"))
        #expect(a.ok == 6 && a.lost == 0 && a.retained == 2 && a.redelivered == 0 && a.duplicated == 1 && a.reordered == 0, "\(a)")
        #expect(result.totals.retained == 2)
        #expect(result.protocolEvents?[counter: "mqttRetained"] == 3)
    }

    @Test("topics: only PUBLISHes matching a filter are messages; the rest (QoS 1 and 2) are counted, and their PUBRELs release nothing")
    func topicFilters() throws {
        var spec = Self.spec
        spec.lists = ["topics": ["fleet/+", "alerts/#"]]
        var s = TrafficScript()
        Self.open(&s, 1, "phone")
        for seq in 1...3 {
            Self.relay(&s, 1, W.publish("fleet/7", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(seq)), .upstream)
            Self.relay(&s, 1, W.publish("fleet/7/debug", #"{"seq":\#(seq)}"#, qos: 1, id: UInt16(10 + seq)), .upstream)
            Self.relay(&s, 1, W.publish("logs", #"{"seq":\#(seq)}"#, qos: 2, id: UInt16(20 + seq)), .upstream)
            Self.relay(&s, 1, W.pubrel(UInt16(20 + seq)), .upstream)
            Self.relay(&s, 1, W.publish("alerts/a/b", #"{"seq":\#(seq)}"#, qos: 0), .upstream)
        }
        s.close(1)
        let result = try Self.audit(s, spec)
        #expect(Set(result.streams.map(\.stream)) == ["fleet/7", "alerts/a/b"], "\(result.streams.map(\.stream))")
        #expect(Self.stream(result, .upstream)?.ok == 3)
        let events = try #require(result.protocolEvents)
        #expect(events[counter: "mqttUnauditedPublishes"] == 6 && events[counter: "mqttUnmatchedPubrels"] == 0)
    }

    @Test("a topic filter matches as a broker's does: + one level, # the rest, no wildcard first for $ topics")
    func topicFilterMatching() {
        func matches(_ filter: String, _ topic: String) -> Bool { MQTTTopicFilter(filter)?.matches(topic) ?? false }
        #expect(matches("fleet/+/position", "fleet/7/position") && !matches("fleet/+/position", "fleet/7/speed"))
        #expect(matches("fleet/#", "fleet") && matches("fleet/#", "fleet/7/position") && !matches("fleet/#", "fleets"))
        #expect(matches("#", "a/b") && !matches("#", "$SYS/uptime") && matches("$SYS/#", "$SYS/uptime"))
        #expect(matches("+/+", "/x") && !matches("fleet/+", "fleet/7/position") && matches("fleet/7", "fleet/7"))
        for bad in ["", "fleet/#/x", "fleet#", "fleet/7+", "a/+b"] { #expect(MQTTTopicFilter.problem(bad) != nil, "\(bad)") }
    }

    @Test("bytes that are not MQTT are a protocol error, and the run judged nothing")
    func notMQTT() throws {
        var s = TrafficScript()
        s.open(1)
        Self.relay(&s, 1, Array("{\"seq\":1,\"stream\":\"a\"}\n".utf8), .upstream)
        s.close(1)
        let result = try Self.audit(s)
        #expect(result.streams.isEmpty)
        #expect(result.anomalies.contains { $0.kind == .protocolError && ($0.detail ?? "").contains("MQTT requires") }, "\(result.anomalies)")
    }
}
