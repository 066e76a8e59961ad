import ChaosCore

/// What the legs of one MQTT connection share: what its CONNECT said (the protocol level, which decides how every
/// later packet is read, the client id, clean session / clean start, the session expiry) and the client id a
/// CONNACK assigned. The first CONNECT read wins: the connection's other upstream leg saw the same bytes.
final class MQTTSession: ProtocolSession {
    /// 3 (MQTT 3.1), 4 (3.1.1) or 5 (5.0); 4 until a CONNECT says otherwise.
    private(set) var level: UInt8 = 4
    /// The client id of the CONNECT, or the one the broker assigned to a client that sent an empty one.
    private(set) var clientID: String?
    /// CONNECT's clean session (3.1.1) or clean start (5.0) flag; nil before a CONNECT.
    private(set) var cleanStart: Bool?
    /// MQTT 5: how long the broker keeps the session after the connection ends, in seconds.
    private(set) var sessionExpiry: UInt32?
    /// Whether PUBLISH packets are handed over as JSON envelopes (``MQTTProtocol/envelopeFields``).
    let envelope: Bool
    /// Whether each PUBLISH is handed over with its topic as its stream (``MQTTProtocol/streamsByTopic(_:)``).
    let streamByTopic: Bool
    /// The QoS 2 messages waiting for their PUBREL, shared by every connection of the audit.
    let releases: MQTTReleases
    /// What the upgrade of MQTT over WebSocket negotiated (permessage-deflate), shared by its two legs.
    let webSocket = WebSocketSession()
    private var connectRead = false

    /// The topic filters whose PUBLISH packets are messages; nil: every topic.
    let topics: [MQTTTopicFilter]?

    /// A session; `envelope` and `streamByTopic` as ``MQTTDecoder`` takes them.
    init(envelope: Bool = false, streamByTopic: Bool = false, releases: MQTTReleases = MQTTReleases(), topics: [MQTTTopicFilter]? = nil) {
        self.envelope = envelope
        self.streamByTopic = streamByTopic
        self.releases = releases
        self.topics = topics
    }

    /// Whether a PUBLISH to `topic` is a message (it matches a filter of `topics:`, or none was given).
    func audits(topic: String) -> Bool {
        topics.map { $0.contains { $0.matches(topic) } } ?? true
    }

    /// The key of a QoS 2 PUBLISH this connection carries `upstream` (from its client) or down (to it): its client id,
    /// or this session alone when the client has none (nothing can resume it elsewhere).
    func releaseKey(upstream: Bool, packetID: UInt16) -> MQTTReleases.Key {
        MQTTReleases.Key(client: clientID ?? "\u{0}\(ObjectIdentifier(self).hashValue)", upstream: upstream, packetID: packetID)
    }

    /// Records a CONNECT (the first one read).
    func connected(level: UInt8, clientID: String, cleanStart: Bool, sessionExpiry: UInt32?) {
        guard !connectRead else { return }
        connectRead = true
        self.level = level
        self.clientID = clientID.isEmpty ? nil : clientID
        self.cleanStart = cleanStart
        self.sessionExpiry = sessionExpiry
    }

    /// Records the client id a CONNACK assigned to a client that sent none.
    func assigned(clientID: String) {
        if self.clientID == nil { self.clientID = clientID }
    }

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        MQTTDecoder(upstream: direction == .upstream, session: self, cap: cap)
    }

    /// The subscriber: its client id (what the broker writes to it is its own copy of each topic).
    var receiver: String? { clientID }

    /// `client-id`: the connection's client id (`stream: client-id` reads it here).
    func requestHeader(_ name: String) -> String? {
        name == MQTTProtocol.clientIDKey ? clientID : nil
    }
}
