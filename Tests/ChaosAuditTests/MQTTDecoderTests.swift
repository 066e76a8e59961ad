import ChaosCore
import Testing

@testable import ChaosAudit
@testable import ChaosProtocols

/// The MQTT leg decoder on hand-built packets (MQTTWire), each stream cut at every offset: CONNECT and CONNACK,
/// PUBLISH at QoS 0, 1 and 2 with their acknowledgements, keepalives, MQTT 5 properties and topic aliases, the
/// envelope, DISCONNECT reason codes, oversized payloads, and bytes that are not MQTT.
@Suite("MQTT decoder: packets")
struct MQTTDecoderTests {
    typealias W = MQTTWire

    /// What a fresh decoder reports for `bytes`, fed whole and cut in two at every offset: all must agree. The
    /// upstream leg's session is shared with the downstream one when given (the CONNECT decides the level). The
    /// delivery contract before each message (its QoS) is left out unless `contracts`.
    static func decodeCut(
        upstream: Bool,
        _ bytes: [UInt8],
        session: () -> MQTTSession = { MQTTSession() },
        cap: Int = 1 << 20,
        contracts: Bool = false
    ) -> [Decoded] {
        let whole = Decoded.feed(MQTTDecoder(upstream: upstream, session: session(), cap: cap), bytes)
        for cut in 1..<bytes.count {
            let decoder = MQTTDecoder(upstream: upstream, session: session(), cap: cap)
            let seen = Decoded.feed(decoder, Array(bytes[..<cut])) + Decoded.feed(decoder, Array(bytes[cut...])).map { $0.shifted(by: cut) }
            #expect(seen == whole, "cut at \(cut)")
            if seen != whole { break }
        }
        return whole.filter {
            guard case .event(.contract, _) = $0 else { return true }
            return contracts
        }
    }

    /// A session that read `connect` (its level, client id, clean flag).
    static func session(after connect: [UInt8], envelope: Bool = false) -> MQTTSession {
        let session = MQTTSession(envelope: envelope)
        _ = Decoded.feed(MQTTDecoder(upstream: true, session: session, cap: 1024), connect)
        return session
    }

    @Test("MQTT 3.1.1 from the client: CONNECT opens the session, each PUBLISH is a message at its last byte, acks and pings are events")
    func clientPackets() {
        let connect = W.connect("phone-7")
        let packets = [
            connect, W.subscribe("fleet/#"), W.publish("fleet/7", #"{"seq":1}"#), W.publish("fleet/7", #"{"seq":2}"#, qos: 1, id: 10),
            W.publish("fleet/7", #"{"seq":3}"#, qos: 2, id: 11, dup: true), W.pubrel(11), W.puback(3), W.pubrec(4), W.pubcomp(5),
            W.pingreq, W.disconnect(),
        ]
        let bytes = packets.flatMap { $0 }
        var ends: [Int] = []
        for packet in packets { ends.append((ends.last ?? 0) + packet.count) }
        let seen = Self.decodeCut(upstream: true, bytes, contracts: true)
        // Each message comes after its contract: QoS 0 at most once, 1 at least once, 2 exactly once (at its PUBREL).
        let expected: [Decoded] = [
            .event(.counted("mqttConnects"), at: ends[0]), .event(.counted("mqttCleanSessions"), at: ends[0]),
            .event(.requestRead, at: ends[0]), .event(.counted("mqttSubscribes"), at: ends[1]),
            .event(.contract(.atMostOnce), at: ends[2]), .message(#"{"seq":1}"#, end: ends[2], binary: false),
            .event(.contract(.atLeastOnce), at: ends[3]), .message(#"{"seq":2}"#, end: ends[3], binary: false),
            .event(.counted("mqttDuplicates"), at: ends[4]), .event(.counted("mqttPubrels"), at: ends[5]),
            .event(.contract(.exactlyOnce), at: ends[5]), .message(#"{"seq":3}"#, end: ends[5], binary: false),
            .event(.counted("mqttPubacks"), at: ends[6]),
            .event(.counted("mqttPubrecs"), at: ends[7]), .event(.counted("mqttPubcomps"), at: ends[8]),
            .event(.keepalive(ack: false, opaque: 0), at: ends[9]), .event(.closing, at: ends[10]),
            .event(.coded("mqttDisconnects", code: "0x00", proxyMayWrite: true), at: ends[10]),
        ]
        #expect(seen == expected)
        let session = Self.session(after: connect)
        #expect(session.clientID == "phone-7" && session.level == 4 && session.cleanStart == true)
        #expect(session.requestHeader("client-id") == "phone-7" && session.requestHeader("x") == nil)
    }

    @Test(
        "QoS 2 counts at its PUBREL: a PUBLISH whose handshake never finished is no message; a PUBREL on a later connection of the same client releases it; one of an unread PUBLISH, or refused by its MQTT 5 reason code, is not"
    )
    func qos2AtRelease() {
        let releases = MQTTReleases()
        func connection(_ client: String, level: UInt8 = 4) -> MQTTDecoder {
            let session = MQTTSession(releases: releases)
            let decoder = MQTTDecoder(upstream: true, session: session, cap: 1024)
            _ = Decoded.feed(decoder, W.connect(client, level: level))
            return decoder
        }
        let publish = W.publish("fleet/7", #"{"seq":1}"#, qos: 2, id: 5)
        #expect(Decoded.feed(connection("p1"), publish) == [])
        let pubrel = W.pubrel(5)
        let resumed = Decoded.feed(connection("p1"), pubrel)
        #expect(
            resumed == [
                .event(.counted("mqttPubrels"), at: pubrel.count), .event(.contract(.exactlyOnce), at: pubrel.count),
                .message(#"{"seq":1}"#, end: pubrel.count, binary: false),
            ]
        )
        let other = Decoded.feed(connection("p2"), pubrel)
        #expect(other == [.event(.counted("mqttPubrels"), at: pubrel.count), .event(.counted("mqttUnmatchedPubrels"), at: pubrel.count)])
        // MQTT 5: a PUBREL with reason code 0x92 (packet identifier not found) releases nothing.
        let v5 = connection("p5", level: 5)
        _ = Decoded.feed(v5, W.publish("fleet/7", #"{"seq":2}"#, qos: 2, id: 6, level: 5))
        let refused: [UInt8] = [0x62, 3, 0, 6, 0x92]
        #expect(Decoded.feed(v5, refused) == [.event(.counted("mqttPubrels"), at: refused.count)])
    }

    @Test(
        "MQTT over WebSocket: the upgrade, then packets split across binary messages and two in one, each placed at the end of the message that completes it"
    )
    func overWebSocket() {
        typealias WS = WebSocketWire
        let connect = W.connect("phone-7")
        let publish1 = W.publish("fleet/7", #"{"seq":1}"#, qos: 1, id: 1)
        let publish2 = W.publish("fleet/7", #"{"seq":2}"#, qos: 1, id: 2)
        let request = WS.request(target: "/mqtt", headers: ["Sec-WebSocket-Protocol: mqtt"])
        // CONNECT and the first half of a PUBLISH in one message, its rest and a second PUBLISH in the next, a PINGREQ.
        let first = WS.frame(2, connect + publish1.prefix(5), mask: WS.clientMask)
        let second = WS.frame(2, Array(publish1.dropFirst(5)) + publish2, mask: WS.clientMask)
        let third = WS.frame(2, W.pingreq, mask: WS.clientMask)
        let close = WS.close(1000, "", mask: WS.clientMask)
        let bytes = request + first + second + third + close
        let ends = [request.count, request.count + first.count, request.count + first.count + second.count, bytes.count - close.count]
        let seen = Self.decodeCut(upstream: true, bytes)
        let expected: [Decoded] = [
            .event(.requestRead, at: ends[0]), .event(.counted("mqttConnects"), at: ends[1]), .event(.counted("mqttCleanSessions"), at: ends[1]),
            .event(.requestRead, at: ends[1]),
            .message(#"{"seq":1}"#, end: ends[2], binary: false), .message(#"{"seq":2}"#, end: ends[2], binary: false),
            .event(.keepalive(ack: false, opaque: 0), at: ends[3]), .event(.closing, at: bytes.count),
        ]
        #expect(seen == expected)
        // The broker's answer: 101 (the upgrade counted), then CONNACK and a PUBACK in one unmasked message.
        let response = WS.response()
        let answer = WS.frame(2, W.connack() + W.puback(1))
        let end = response.count + answer.count
        let down = Self.decodeCut(upstream: false, response + answer)
        #expect(
            down == [
                .event(.counted("mqttWebSocketUpgrades"), at: response.count), .event(.coded("mqttConnacks", code: "0x00"), at: end),
                .event(.counted("mqttPubacks"), at: end),
            ]
        )
    }

    @Test("from the broker: CONNACK's code and session present, retained PUBLISHes counted and marked, PINGRESP a keepalive answer")
    func brokerPackets() {
        let connack = W.connack(sessionPresent: true)
        let retained = W.publish("fleet/7", #"{"seq":9}"#, qos: 1, id: 2, retain: true)
        let bytes = connack + retained + W.pingresp
        let expected: [Decoded] = [
            .event(.coded("mqttConnacks", code: "0x00"), at: connack.count),
            .event(.counted("mqttSessionsPresent"), at: connack.count),
            .event(.counted("mqttRetained"), at: connack.count + retained.count),
            .event(.retained, at: connack.count + retained.count),
            .message(#"{"seq":9}"#, end: connack.count + retained.count, binary: false),
            .event(.keepalive(ack: true, opaque: 0), at: bytes.count),
        ]
        #expect(Self.decodeCut(upstream: false, bytes) == expected)
    }

    @Test("MQTT 5: properties are skipped, a topic alias stands for its topic in later PUBLISHes, DISCONNECT has a reason code")
    func mqtt5() {
        // Session expiry 3600 s on CONNECT; on the PUBLISH a message expiry, a user property and topic alias 3.
        let connect = W.connect("c5", level: 5, clean: false, properties: [0x11, 0, 0, 0x0E, 0x10])
        let session = Self.session(after: connect, envelope: true)
        #expect(session.level == 5 && session.sessionExpiry == 3600 && session.cleanStart == false)
        let user: [UInt8] = [0x26] + W.string("k") + W.string("v")
        let first = W.publish("fleet/9", #"{"seq":1}"#, qos: 1, id: 7, level: 5, properties: [0x02, 0, 0, 0, 60] + user + [0x23, 0, 3])
        let aliased = W.publish("", #"{"seq":2}"#, level: 5, properties: [0x23, 0, 3])
        let unknown = W.publish("", #"{"seq":3}"#, level: 5, properties: [0x23, 0, 4])
        let shutdown = W.disconnect(reason: 0x8B)
        let connack = W.connack(level: 5)
        let bytes = connack + first + aliased + unknown + shutdown
        let seen = Self.decodeCut(upstream: false, bytes, session: { Self.session(after: connect, envelope: true) })
        let base = connack.count
        let expected: [Decoded] = [
            .event(.coded("mqttConnacks", code: "0x00"), at: base),
            .message(
                #"{"topic":"fleet/9","qos":1,"dup":false,"retain":false,"packet_id":7,"data":{"seq":1}}"#,
                end: base + first.count,
                binary: false
            ),
            .message(
                #"{"topic":"fleet/9","qos":0,"dup":false,"retain":false,"data":{"seq":2}}"#,
                end: base + first.count + aliased.count,
                binary: false
            ),
            .event(.unreadable(reason: "a PUBLISH with topic alias 4, which no PUBLISH set"), at: base + first.count + aliased.count + unknown.count),
            .event(.closing, at: bytes.count), .event(.coded("mqttDisconnects", code: "0x8B", proxyMayWrite: true), at: bytes.count),
        ]
        #expect(seen == expected)
    }

    @Test("the envelope holds a payload that is not JSON as a string")
    func textPayload() {
        let bytes = W.publish("t", "seq=1 \"q\"")
        #expect(
            Self.decodeCut(upstream: true, W.connect("c") + bytes, session: { MQTTSession(envelope: true) }).last
                == .message(
                    #"{"topic":"t","qos":0,"dup":false,"retain":false,"data":"seq=1 \"q\""}"#,
                    end: W.connect("c").count + bytes.count,
                    binary: false
                )
        )
    }

    @Test("a CONNACK of MQTT 5 gives the client id it assigned to a client that sent none")
    func assignedClientID() {
        let connect = W.connect("", level: 5)
        let session = Self.session(after: connect)
        #expect(session.clientID == nil)
        _ = Decoded.feed(
            MQTTDecoder(upstream: false, session: session, cap: 1024),
            W.connack(level: 5, properties: [0x12] + W.string("auto-1F"))
        )
        #expect(session.requestHeader("client-id") == "auto-1F")
    }

    @Test("a payload over the cap is counted as oversized and skipped; the decoder goes on and its buffers stay bounded")
    func oversized() {
        let big = W.publish("t", String(repeating: "x", count: 200_000))
        let small = W.publish("t", #"{"seq":2}"#)
        let decoder = MQTTDecoder(upstream: false, session: MQTTSession(), cap: 1024)
        let seen = Decoded.feed(decoder, W.connack() + big + small, chunk: 1000)
        let bigEnd = 4 + big.count
        let expected: [Decoded] = [
            .event(.oversized(bytes: 200_000, end: bigEnd), at: bigEnd),
            .event(.contract(.atMostOnce), at: bigEnd + small.count), .message(#"{"seq":2}"#, end: bigEnd + small.count, binary: false),
        ]
        #expect(Array(seen.suffix(3)) == expected)
        #expect(decoder.bufferedCapacity < 1024 + MQTTDecoder.headLimit + 8192)
    }

    @Test(
        "bytes that are not MQTT stop the decoder with a problem",
        arguments: [
            (true, Array(#"{"seq":1}"#.utf8), "pubcomp with flags 1011 (MQTT requires 0)"),
            (true, W.subscribe("t"), "the client's first packet is subscribe, not CONNECT: not MQTT"),
            (false, W.publish("t", "x"), "the server's first packet is publish, not CONNACK: not MQTT"),
            (true, W.connect("c") + [0x00, 0], "a packet of reserved type 0"),
            (true, W.connect("c") + [0x36, 2, 0, 1], "a PUBLISH of QoS 3"),
            (true, W.connect("c") + [0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], "a remaining length longer than four bytes"),
            (
                true, W.packet(1, W.string("HTTP") + [4, 2, 0, 60] + W.string("c")),
                "a malformed connect: protocol HTTP level 4 (chaos reads MQTT 3.1, 3.1.1 and 5.0)"
            ),
            (true, W.connect("c") + W.packet(3, [0, 9, 65]), "a malformed publish: a string of 9 bytes runs past the packet's end"),
        ] as [(Bool, [UInt8], String)]
    )
    func notMQTT(upstream: Bool, bytes: [UInt8], reason: String) {
        let seen = Decoded.feed(MQTTDecoder(upstream: upstream, session: MQTTSession(), cap: 1024), bytes)
        guard case .problem(.protocolError(let found), _)? = seen.last else {
            Issue.record("no problem for \(bytes.prefix(12)): \(seen)")
            return
        }
        #expect(found == reason)
    }

    @Test("the pubrel flags check: a PUBREL with flags 0 is not MQTT")
    func pubrelFlags() {
        let seen = Decoded.feed(MQTTDecoder(upstream: true, session: MQTTSession(), cap: 1024), W.connect("c") + [0x60, 2, 0, 1])
        #expect(seen.last == .problem(.protocolError("pubrel with flags 0 (MQTT requires 10)"), at: W.connect("c").count))
    }

    @Test(
        "stream: topic needs no envelope: the decoder hands each payload over with its topic, whole or cut anywhere (QoS 2 at its PUBREL, an alias resolved)"
    )
    func topicNamesTheStream() {
        let bytes =
            W.connect("phone", level: 5) + W.publish("fleet/7", #"{"seq":1}"#, level: 5, properties: [0x23, 0, 3])
            + W.publish("", #"{"seq":2}"#, qos: 1, id: 2, level: 5, properties: [0x23, 0, 3])
            + W.publish("fleet/8", #"{"seq":3}"#, qos: 2, id: 4, level: 5) + W.pubrel(4)
        let expected = [#"fleet/7 {"seq":1}"#, #"fleet/7 {"seq":2}"#, #"fleet/8 {"seq":3}"#]
        for cut in 0..<bytes.count {
            let decoder = MQTTDecoder(upstream: true, session: MQTTSession(streamByTopic: true), cap: 1024)
            var seen: [String] = []
            for piece in [Array(bytes[..<cut]), Array(bytes[cut...])] {
                piece.withUnsafeBufferPointer { buffer in
                    decoder.decode(buffer) { output in
                        guard case .message(let body, _, _, let stream) = output else { return }
                        let topic = stream.map { String(decoding: $0, as: UTF8.self) } ?? "(none)"
                        seen.append("\(topic) \(String(decoding: body, as: UTF8.self))")
                    }
                }
            }
            #expect(seen == expected, "cut at \(cut)")
            if seen != expected { break }
        }
        var spec = ProtocolSpec(framing: .mqtt, seq: "seq", stream: "topic", maxMessage: 4096)
        #expect(MQTTProtocol.streamsByTopic(spec) && !MQTTProtocol.namesPacketFields(spec))
        let fields = MQTTProtocol.fieldSpec(spec)
        #expect(fields.seq == "seq" && fields.stream == nil, "no field of the payload names the stream")
        spec.downstream = ProtocolSpec.DirectionOverride(stream: "client-id")
        #expect(!MQTTProtocol.streamsByTopic(spec), "a direction of its own reads the envelope as before")
    }

    @Test("paths: the packet's fields read the envelope, bare keys and data.KEY its payload, client-id the connection")
    func fieldSpec() {
        var spec = ProtocolSpec(framing: .mqtt, seq: "seq", stream: "topic", ignore: ["qos": ["0"]], maxMessage: 4096)
        var fields = MQTTProtocol.fieldSpec(spec)
        #expect(fields.seq == "/data/seq" && fields.stream == nil && fields.type == "/data/type" && fields.ignore.keys.first == "/qos")
        spec.stream = "client-id"
        spec.ignore = [:]
        spec.seq = "data.meta.seq"
        fields = MQTTProtocol.fieldSpec(spec)
        #expect(fields.seq == "/data/meta/seq" && fields.stream == "header:client-id")
        spec.seq = "seq"
        fields = MQTTProtocol.fieldSpec(spec)
        #expect(fields.seq == "seq" && fields.stream == "header:client-id" && !MQTTProtocol.namesPacketFields(spec))
    }
}
