import Synchronization

/// QoS 2 PUBLISH packets waiting for their PUBREL, across the connections of one audit. A QoS 2 message is handed on
/// at its release: Mosquitto passes an incoming one to its subscribers when the publisher's PUBREL comes, and paho
/// gives a subscriber's application the message when the broker's PUBREL comes. So the audit counts a QoS 2 message at
/// its PUBREL, not its PUBLISH: one whose handshake never finished (the publisher stopped, or never resumed it) was
/// never the receiver's to lose. The PUBREL of a resumed session can come on a later connection than its PUBLISH, so
/// the messages are kept by the sender's client id, the direction and the packet id, not per connection.
///
/// Bounded: at most ``entryLimit`` messages and ``byteLimit`` bytes, the oldest forgotten first (a PUBREL for a
/// forgotten one is counted, not a message). A new PUBLISH with the same packet id replaces the old one: MQTT reuses a
/// packet id only once its handshake is over.
final class MQTTReleases: Sendable {
    /// The most messages kept.
    static let entryLimit = 65_536
    /// The most bytes kept.
    static let byteLimit = 64 << 20

    /// Who sent a QoS 2 PUBLISH: its client (the connection's client id) and which way it went, and its packet id.
    struct Key: Hashable, Sendable {
        var client: String
        var upstream: Bool
        var packetID: UInt16
    }

    private struct State {
        var messages: [Key: (bytes: [UInt8]?, topic: [UInt8], retained: Bool, generation: Int)] = [:]
        /// Keys in the order they were stored, with the generation they were stored at (a replaced key's old place is
        /// skipped when its turn comes).
        var order: [(key: Key, generation: Int)] = []
        var head = 0
        var generation = 0
        var bytes = 0
    }

    private let state = Mutex(State())

    /// A QoS 2 PUBLISH was read: `bytes` is the message it carries (its payload or its envelope; nil: one that is not
    /// audited, whose PUBREL releases nothing); `topic`, its topic where the topic names its stream (else empty);
    /// `retained`, whether it is a retained message the broker sent again.
    func published(_ key: Key, bytes: [UInt8]?, topic: [UInt8] = [], retained: Bool = false) {
        state.withLock { state in
            if let old = state.messages[key] { state.bytes -= (old.bytes?.count ?? 0) + old.topic.count }
            state.generation += 1
            state.messages[key] = (bytes, topic, retained, state.generation)
            state.order.append((key, state.generation))
            state.bytes += (bytes?.count ?? 0) + topic.count
            while state.messages.count > Self.entryLimit || state.bytes > Self.byteLimit, state.head < state.order.count {
                let oldest = state.order[state.head]
                state.head += 1
                guard let kept = state.messages[oldest.key], kept.generation == oldest.generation else { continue }
                state.messages[oldest.key] = nil
                state.bytes -= (kept.bytes?.count ?? 0) + kept.topic.count
            }
            if state.head > 1024, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    /// The message a PUBREL releases, if its PUBLISH was read and is still kept. It stays kept: the proxy's other
    /// copy of the leg, and a sender that resends its PUBREL on a new connection, release it too.
    func released(_ key: Key) -> (bytes: [UInt8]?, topic: [UInt8], retained: Bool)? {
        state.withLock { state in state.messages[key].map { ($0.bytes, $0.topic, $0.retained) } }
    }
}
