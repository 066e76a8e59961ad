import NIOCore

/// The server's state for one logical stream; it outlives TCP connections.
final class ServerStream {
    /// The stream name the client chose in HELLO.
    let name: String
    /// Upstream (client→server) deduplication and cumulative ack.
    var upstream = InboundSequencer()
    /// Downstream (server→client) numbering and unacknowledged messages.
    var downstream: OutboundQueue
    /// False while the attached client is naive: no retransmission, no deduplication.
    var resumes = true
    /// The connection currently carrying the stream.
    var attached: ServerConnection?
    /// The downstream producer, running while a connection is attached.
    var producer: RepeatedTask?

    init(name: String, queueCapacity: Int) {
        self.name = name
        self.downstream = OutboundQueue(capacity: queueCapacity)
    }
}

/// One accepted TCP connection of the server.
final class ServerConnection {
    /// The connection's channel.
    let channel: any Channel
    /// A number for logs.
    let id: Int
    /// The stream named in this connection's HELLO.
    var stream: ServerStream?
    /// Something was processed since the last ACK was sent.
    var needsAck = false

    init(channel: any Channel, id: Int) {
        self.channel = channel
        self.id = id
    }
}
