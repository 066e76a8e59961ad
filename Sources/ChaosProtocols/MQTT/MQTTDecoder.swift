import ChaosCore

/// One leg of an MQTT connection (3.1, 3.1.1 or 5.0, as its CONNECT says): control packets in turn, each a fixed
/// header (type, flags, a remaining length of up to four bytes) and that many bytes. A PUBLISH is a message: its
/// payload, or (``MQTTSession/envelope``) a JSON envelope of its topic, QoS, flags, packet id and payload. CONNECT,
/// CONNACK, SUBSCRIBE, the acknowledgements and DISCONNECT are protocol events; PINGREQ and PINGRESP are keepalives.
/// MQTT 5 topic aliases are followed per direction, as the protocol scopes them.
///
/// MQTT over WebSocket (a leg that opens with an HTTP upgrade: `GET` from the client, `HTTP/` from the broker) is read
/// through a ``WebSocketDecoder``: its binary messages carry the packets, which need not align with them, and every
/// packet ends on the wire where the message that completes it ends.
///
/// Memory is bounded: a packet is kept up to its first ``headLimit`` bytes past `cap`, the rest counted and skipped
/// (a PUBLISH whose payload is over `cap` is counted as oversized). Bytes that are not MQTT (a first packet from the
/// client that is not a CONNECT, a reserved type, flags a type does not allow, a malformed field) stop the decoder
/// with a problem; the rest of the leg is ignored.
final class MQTTDecoder: LegDecoder {
    /// What a packet may hold beyond a message's cap and still be read: its topic (at most 65,535 bytes), packet id
    /// and properties.
    static let headLimit = 72 * 1024

    enum Phase: Equatable { case header, body, stopped }

    /// Client → server: the leg carries CONNECT and the client's packets.
    let upstream: Bool
    let session: MQTTSession
    let cap: Int
    private(set) var phase = Phase.header
    /// The fixed header read so far (the type byte and up to four bytes of remaining length).
    private var header: [UInt8] = []
    /// The packet's type, and its remaining length and the part of it still to come.
    private var type = MQTTPacketType.connect
    private var length = 0
    private var remaining = 0
    /// The packet's bytes after its fixed header, up to ``headLimit`` past `cap`.
    private var body: [UInt8] = []
    /// Whether a packet was read on this leg yet (the first one must open the session).
    private var started = false
    /// This direction's topic aliases (MQTT 5).
    private var aliases: [UInt16: [UInt8]] = [:]
    /// The delivery contract this leg's messages were last said to carry.
    private var promised: DeliveryContract?
    /// The envelope being built (kept between messages).
    private var envelopeBytes: [UInt8] = []
    /// The leg's WebSocket frames when it is MQTT over WebSocket (decided by its first byte).
    private var webSocket: WebSocketDecoder?
    private var firstByteSeen = false

    /// A decoder for the `upstream` (client → server) or downstream leg, sharing `session` with the connection's
    /// other legs; payloads over `cap` bytes are counted, not kept.
    init(upstream: Bool, session: MQTTSession, cap: Int) {
        self.upstream = upstream
        self.session = session
        self.cap = cap
    }

    /// Part of a PUBLISH was read (a close now truncates a message); other packets are not messages.
    var hasPartialMessage: Bool {
        if webSocket?.hasPartialMessage == true { return true }
        return switch phase {
        case .header: header.first.map { $0 >> 4 == MQTTPacketType.publish.rawValue } ?? false
        case .body: type == .publish
        case .stopped: false
        }
    }

    /// Anywhere on a leg known to be TCP, even mid-packet: the partial packet is handed over with the rest. Never before
    /// the leg's first byte (it may open a WebSocket upgrade) nor over WebSocket, whose decoder's state is not this
    /// one's to hand over.
    var canHandOverState: Bool { firstByteSeen && webSocket == nil }

    /// Takes the state of `other`, the decoder of the same leg's other copy, which decoded the bytes this one skipped
    /// (``canHandOverState`` held for both when it began to).
    func adoptState(of other: any LegDecoder) -> Bool {
        guard let other = other as? MQTTDecoder, other.upstream == upstream, other.webSocket == nil, webSocket == nil else {
            return false
        }
        (phase, header, type, length, remaining, body) = (other.phase, other.header, other.type, other.length, other.remaining, other.body)
        (started, aliases, promised, firstByteSeen) = (other.started, other.aliases, other.promised, other.firstByteSeen)
        return true
    }

    /// The bytes the decoder holds in its buffers (what a test checks stays bounded).
    var bufferedCapacity: Int { header.capacity + body.capacity + envelopeBytes.capacity + (webSocket?.bufferedCapacity ?? 0) }

    func dropPartial() {
        webSocket?.dropPartial()
        guard phase != .stopped else { return }
        phase = .header
        header = []
        body = []
        remaining = 0
    }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        if !firstByteSeen, let first = input.first {
            firstByteSeen = true
            if first == UInt8(ascii: upstream ? "G" : "H") {
                webSocket = WebSocketDecoder(upstream: upstream, session: session.webSocket, cap: cap + Self.headLimit)
            }
        }
        if let webSocket { return decodeWebSocket(webSocket, input, output) }
        decodePackets(input, output)
    }

    /// Packets as the bytes of a TCP leg, or of a WebSocket leg's messages one after another.
    private func decodePackets(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        var position = 0
        while position < input.count, phase != .stopped {
            if phase == .header {
                if header.isEmpty, let next = wholePacket(input, at: position, output) {
                    position = next
                    continue
                }
                position = readHeader(input, from: position, output)
            } else {
                let count = min(remaining, input.count - position)
                let keep = min(count, cap + Self.headLimit - body.count)
                if keep > 0 { body.append(contentsOf: UnsafeBufferPointer(rebasing: input[position..<position + keep])) }
                position += count
                remaining -= count
                if remaining == 0 { bodyEnded(at: position, output) }
            }
        }
    }

    /// A WebSocket leg: its upgrade and frames, the packets in its binary messages (each thing they say placed at the end
    /// of the message that completed it). Its WebSocket pings and close frame are the transport's; MQTT's own PINGREQ
    /// and DISCONNECT are what count.
    private func decodeWebSocket(_ webSocket: WebSocketDecoder, _ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        webSocket.decode(input) { found in
            switch found {
            case .message(let bytes, let end, _, _):
                guard phase != .stopped else { return }
                decodePackets(bytes) { inner in
                    switch inner {
                    case .message(let message, _, let binary, let stream): output(.message(message, end: end, binary: binary, stream: stream))
                    case .callMessage, .callEnded: break
                    case .event(.oversized(let size, _), _): output(.event(.oversized(bytes: size, end: end), at: end))
                    case .event(let event, _): output(.event(event, at: end))
                    case .problem(let problem, _): output(.problem(problem, at: end))
                    }
                }
            case .callMessage, .callEnded:
                break
            case .event(.counted("upgrades"), let at):
                output(.event(.counted("mqttWebSocketUpgrades"), at: at))
            case .event(.counted("upgradeFailures"), let at):
                output(.event(.counted("mqttWebSocketRefusals"), at: at))
            case .event(.oversized(_, let end), let at):
                // The packets in a message too large to keep cannot be followed past it.
                stop("a WebSocket message over the size limit: the MQTT packets in it cannot be followed", at: max(at, end), output)
            case .event(.requestRead, let at):
                output(.event(.requestRead, at: at))
            case .event(.closing, let at):
                output(.event(.closing, at: at))
            case .event:
                break
            case .problem(let problem, let at):
                phase = .stopped
                output(.problem(problem, at: at))
            }
        }
    }

    /// A packet that lies whole in `input` from `start`, read in place (no copy): returns where it ends; nil when it
    /// does not lie whole there (or its header is not one), for ``readHeader(_:from:_:)`` to take byte by byte.
    @inline(__always)
    private func wholePacket(_ input: UnsafeBufferPointer<UInt8>, at start: Int, _ output: (DecoderOutput) -> Void) -> Int? {
        var position = start + 1
        var packetLength = 0
        var shift = 0
        while true {
            guard position < input.count, shift <= 21 else { return nil }
            let byte = input[position]
            position += 1
            packetLength |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
        }
        guard packetLength <= input.count - position else { return nil }
        if let problem = checkFirstByte(input[start]) {
            stop(problem, at: start, output)
            return input.count
        }
        length = packetLength
        remaining = 0
        let end = position + packetLength
        packetEnded(flags: input[start] & 0x0F, body: UnsafeBufferPointer(rebasing: input[position..<end]), at: end, output)
        return end
    }

    /// Reads the fixed header byte by byte; returns where the packet's body starts.
    private func readHeader(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        var position = start
        while position < input.count, phase == .header {
            let byte = input[position]
            position += 1
            header.append(byte)
            if header.count == 1 {
                if let problem = checkFirstByte(byte) {
                    stop(problem, at: position - 1, output)
                    return input.count
                }
            } else if byte & 0x80 == 0 {
                length = header.dropFirst().reversed().reduce(0) { $0 << 7 | Int($1 & 0x7F) }
                remaining = length
                phase = .body
                body.removeAll(keepingCapacity: body.capacity <= 4096)
                if remaining == 0 { bodyEnded(at: position, output) }
            } else if header.count == 5 {
                stop("a remaining length longer than four bytes", at: position, output)
                return input.count
            }
        }
        return position
    }

    /// Why `byte` cannot start a packet here (nil: it can), and the packet's type when it can.
    private func checkFirstByte(_ byte: UInt8) -> String? {
        guard let found = MQTTPacketType(rawValue: byte >> 4) else { return "a packet of reserved type 0" }
        if let flags = found.requiredFlags, byte & 0x0F != flags {
            return "\(found) with flags \(String(byte & 0x0F, radix: 2)) (MQTT requires \(String(flags, radix: 2)))"
        }
        if found == .publish, byte & 0b0110 == 0b0110 { return "a PUBLISH of QoS 3" }
        if !started {
            if upstream, found != .connect { return "the client's first packet is \(found), not CONNECT: not MQTT" }
            if !upstream, found != .connack, found != .auth {
                return "the server's first packet is \(found), not CONNACK: not MQTT"
            }
        }
        type = found
        return nil
    }

    /// The packet gathered in ``body`` (its header in ``header``) ends at `end`.
    private func bodyEnded(at end: Int, _ output: (DecoderOutput) -> Void) {
        let flags = header[0] & 0x0F
        header.removeAll(keepingCapacity: true)
        // Its own reference: a malformed packet's stop empties `body` while the packet is read.
        let packet = body
        packet.withUnsafeBufferPointer { packetEnded(flags: flags, body: $0, at: end, output) }
        if body.capacity > 4096 + cap { body = [] }
    }

    /// A packet of ``type`` with `flags` and `body` (all of it, or its first bytes past `cap` when ``length`` is more)
    /// ends at `end`.
    private func packetEnded(flags: UInt8, body: UnsafeBufferPointer<UInt8>, at end: Int, _ output: (DecoderOutput) -> Void) {
        phase = .header
        started = true
        do {
            try read(flags: flags, body: body, end: end, output)
        } catch let malformed as MQTTMalformed {
            stop("a malformed \(type): \(malformed.reason)", at: end, output)
        } catch {
            stop("a malformed \(type)", at: end, output)
        }
    }

    private func read(flags: UInt8, body: UnsafeBufferPointer<UInt8>, end: Int, _ output: (DecoderOutput) -> Void) throws {
        var fields = MQTTFieldReader(body)
        switch type {
        case .connect:
            try readConnect(&fields)
            output(.event(.counted("mqttConnects"), at: end))
            if session.cleanStart == true { output(.event(.counted("mqttCleanSessions"), at: end)) }
            output(.event(.requestRead, at: end))
        case .connack:
            let acknowledge = try fields.byte()
            let code = try fields.byte()
            if session.level >= 5, fields.remaining > 0, let assigned = try fields.properties().assignedClientID {
                session.assigned(clientID: assigned)
            }
            output(.event(.coded("mqttConnacks", code: Self.hex(code)), at: end))
            if acknowledge & 1 == 1 { output(.event(.counted("mqttSessionsPresent"), at: end)) }
        case .publish:
            try readPublish(flags: flags, &fields, end: end, output)
        case .puback: output(.event(.counted("mqttPubacks"), at: end))
        case .pubrec: output(.event(.counted("mqttPubrecs"), at: end))
        case .pubrel:
            output(.event(.counted("mqttPubrels"), at: end))
            try release(&fields, end: end, output)
        case .pubcomp: output(.event(.counted("mqttPubcomps"), at: end))
        case .subscribe:
            output(.event(.counted("mqttSubscribes"), at: end))
        case .suback:
            // The broker has the subscription: what it takes from a publisher from now on is owed to this client (a
            // PUBLISH it took between the SUBSCRIBE and this may have been handled before the subscription or after).
            output(.event(.subscribed, at: end))
        case .pingreq: output(.event(.keepalive(ack: false, opaque: 0), at: end))
        case .pingresp: output(.event(.keepalive(ack: true, opaque: 0), at: end))
        case .disconnect:
            var code: UInt8 = 0
            if session.level >= 5, fields.remaining > 0 { code = try fields.byte() }
            output(.event(.closing, at: end))
            output(.event(.coded("mqttDisconnects", code: Self.hex(code), proxyMayWrite: true), at: end))
        case .unsubscribe, .unsuback, .auth:
            break
        }
    }

    /// CONNECT: the protocol name and level, the flags (clean session / clean start), the keepalive, MQTT 5's
    /// properties (session expiry), then the client id.
    private func readConnect(_ fields: inout MQTTFieldReader) throws {
        let name = try fields.string()
        let level = try fields.byte()
        guard (name == "MQTT" && (level == 4 || level == 5)) || (name == "MQIsdp" && level == 3) else {
            throw MQTTMalformed("protocol \(name.prefix(16)) level \(level) (chaos reads MQTT 3.1, 3.1.1 and 5.0)")
        }
        let flags = try fields.byte()
        guard flags & 1 == 0 else { throw MQTTMalformed("the reserved connect flag is set") }
        _ = try fields.uint16()
        var properties = MQTTProperties()
        if level >= 5 { properties = try fields.properties() }
        let clientID = try fields.string()
        session.connected(level: level, clientID: clientID, cleanStart: flags & 0b10 != 0, sessionExpiry: properties.sessionExpiry)
    }

    /// PUBLISH: the topic (or an MQTT 5 alias for it), the packet id of QoS 1 and 2, MQTT 5's properties, then the
    /// payload: the message.
    private func readPublish(flags: UInt8, _ fields: inout MQTTFieldReader, end: Int, _ output: (DecoderOutput) -> Void) throws {
        let qos = Int(flags >> 1 & 3)
        let topic = try fields.binary()
        var packetID: UInt16?
        if qos > 0 { packetID = try fields.uint16() }
        let alias = session.level >= 5 ? try fields.properties().topicAlias : nil
        let packet = Publish(qos: qos, flags: flags, packetID: packetID, payloadBytes: length - fields.position, whole: fields.bytes.count == length)
        let payload = fields.rest()
        guard let alias else { return publish(packet, topic: topic, payload: payload, end: end, output) }
        if !topic.isEmpty {
            aliases[alias] = Array(topic)
            return publish(packet, topic: topic, payload: payload, end: end, output)
        }
        guard let known = aliases[alias] else {
            return output(.event(.unreadable(reason: "a PUBLISH with topic alias \(alias), which no PUBLISH set"), at: end))
        }
        known.withUnsafeBufferPointer { publish(packet, topic: $0, payload: payload, end: end, output) }
    }

    /// What a PUBLISH's fixed and variable header say: its payload's size, and whether its body was kept whole (not
    /// cut past the cap).
    private struct Publish {
        var qos: Int
        var flags: UInt8
        var packetID: UInt16?
        var payloadBytes: Int
        var whole: Bool
    }

    /// A PUBLISH to `topic` carrying `payload`: counted, and a message unless its topic is not audited or it is over
    /// the cap. A QoS 2 one is kept for its PUBREL.
    private func publish(
        _ packet: Publish,
        topic: UnsafeBufferPointer<UInt8>,
        payload: UnsafeBufferPointer<UInt8>,
        end: Int,
        _ output: (DecoderOutput) -> Void
    ) {
        if packet.flags & 0b1000 != 0 { output(.event(.counted("mqttDuplicates"), at: end)) }
        // A retained message the broker sends a subscriber (on a new subscription: live ones it forwards unflagged,
        // unless the subscription keeps the flag as published).
        let retained = packet.flags & 1 != 0 && !upstream
        if retained { output(.event(.counted("mqttRetained"), at: end)) }
        guard session.topics == nil || session.audits(topic: String(decoding: topic, as: UTF8.self)) else {
            output(.event(.counted("mqttUnauditedPublishes"), at: end))
            // A QoS 2 one's PUBREL still comes: it releases nothing.
            if packet.qos == 2, let packetID = packet.packetID {
                session.releases.published(session.releaseKey(upstream: upstream, packetID: packetID), bytes: nil)
            }
            return
        }
        guard packet.payloadBytes <= cap, packet.whole else {
            return output(.event(.oversized(bytes: packet.payloadBytes, end: end), at: end))
        }
        if session.envelope {
            buildEnvelope(topic: topic, qos: packet.qos, flags: packet.flags, packetID: packet.packetID, payload: payload)
        }
        let stream = session.streamByTopic ? topic : nil
        if packet.qos == 2, let packetID = packet.packetID {
            // Handed on at its PUBREL (``MQTTReleases``).
            session.releases.published(
                session.releaseKey(upstream: upstream, packetID: packetID),
                bytes: session.envelope ? envelopeBytes : Array(payload),
                topic: stream.map(Array.init) ?? [],
                retained: retained
            )
        } else {
            promise(packet.qos == 0 ? .atMostOnce : .atLeastOnce, at: end, output)
            if retained { output(.event(.retained, at: end)) }
            if session.envelope {
                envelopeBytes.withUnsafeBufferPointer { output(.message($0, end: end, binary: false, stream: stream)) }
            } else {
                output(.message(payload, end: end, binary: false, stream: stream))
            }
        }
        if envelopeBytes.capacity > 4096 + cap { envelopeBytes = [] }
    }

    /// Says the leg's messages are promised `contract` from now on, when that changes (most legs carry one QoS).
    private func promise(_ contract: DeliveryContract, at end: Int, _ output: (DecoderOutput) -> Void) {
        guard contract != promised else { return }
        promised = contract
        output(.event(.contract(contract), at: end))
    }

    /// PUBREL: the QoS 2 message of its packet id is handed on now, unless an MQTT 5 reason code says the packet id
    /// was not found. One whose PUBLISH was not read (or was forgotten) is counted.
    private func release(_ fields: inout MQTTFieldReader, end: Int, _ output: (DecoderOutput) -> Void) throws {
        let packetID = try fields.uint16()
        if session.level >= 5, fields.remaining > 0, try fields.byte() != 0 { return }
        guard let (kept, topic, retained) = session.releases.released(session.releaseKey(upstream: upstream, packetID: packetID)) else {
            return output(.event(.counted("mqttUnmatchedPubrels"), at: end))
        }
        guard let message = kept else { return }  // a PUBLISH to a topic outside `topics:`
        promise(.exactlyOnce, at: end, output)
        if retained { output(.event(.retained, at: end)) }
        message.withUnsafeBufferPointer { body in
            guard session.streamByTopic else { return output(.message(body, end: end, binary: false)) }
            topic.withUnsafeBufferPointer { output(.message(body, end: end, binary: false, stream: $0)) }
        }
    }

    /// `{"topic":"t","qos":1,"dup":false,"retain":false,"packet_id":7,"data":{…}}`: the packet id absent at QoS 0, the
    /// payload as written when it is a JSON object or array and as a string otherwise.
    private func buildEnvelope(topic: UnsafeBufferPointer<UInt8>, qos: Int, flags: UInt8, packetID: UInt16?, payload: UnsafeBufferPointer<UInt8>) {
        envelopeBytes.removeAll(keepingCapacity: true)
        envelopeBytes.append(contentsOf: Self.topicKey)
        SSEEventParser.appendQuoted(topic, to: &envelopeBytes)
        envelopeBytes.append(contentsOf: Self.qosKey)
        envelopeBytes.append(UInt8(ascii: "0") + UInt8(qos))
        envelopeBytes.append(contentsOf: flags & 0b1000 != 0 ? Self.dupTrue : Self.dupFalse)
        envelopeBytes.append(contentsOf: flags & 1 != 0 ? Self.retainTrue : Self.retainFalse)
        if let packetID {
            envelopeBytes.append(contentsOf: Self.packetIDKey)
            Self.appendDecimal(packetID, to: &envelopeBytes)
        }
        envelopeBytes.append(contentsOf: Self.dataKey)
        let first = payload.first { $0 != 32 && $0 != 9 && $0 != 10 && $0 != 13 }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
            envelopeBytes.append(contentsOf: payload)
        } else {
            SSEEventParser.appendQuoted(payload, to: &envelopeBytes)
        }
        envelopeBytes.append(UInt8(ascii: "}"))
    }

    private static let topicKey = Array(#"{"topic":"#.utf8)
    private static let qosKey = Array(#","qos":"#.utf8)
    private static let dupTrue = Array(#","dup":true"#.utf8)
    private static let dupFalse = Array(#","dup":false"#.utf8)
    private static let retainTrue = Array(#","retain":true"#.utf8)
    private static let retainFalse = Array(#","retain":false"#.utf8)
    private static let packetIDKey = Array(#","packet_id":"#.utf8)
    private static let dataKey = Array(#","data":"#.utf8)

    /// Appends `value` in decimal, without making a String.
    static func appendDecimal(_ value: UInt16, to out: inout [UInt8]) {
        var divisor: UInt16 = 10_000
        var rest = value
        var started = false
        while divisor > 0 {
            let digit = rest / divisor
            rest %= divisor
            if digit > 0 || started || divisor == 1 {
                out.append(UInt8(ascii: "0") + UInt8(digit))
                started = true
            }
            divisor /= 10
        }
    }

    /// A reason or return code as the reports show it: `0x8B`.
    static func hex(_ code: UInt8) -> String {
        let digits = String(code, radix: 16, uppercase: true)
        return "0x" + (digits.count == 1 ? "0" + digits : digits)
    }

    private func stop(_ reason: String, at position: Int, _ output: (DecoderOutput) -> Void) {
        phase = .stopped
        header = []
        body = []
        output(.problem(.protocolError(reason), at: position))
    }
}
