import Foundation

/// One line of the demo protocol: newline-delimited JSON, one object per line (PRODUCT §6).
///
/// Data is `MSG` (with `stream`, `seq`, `id`, `payload`); `ACK` carries a cumulative `ack`;
/// `HELLO` / `WELCOME` open or resume a stream (with the sender's last processed seq in `ack`);
/// `PING` / `PONG` are the heartbeat; `GAP` (`from`, `to`) says the sender gave up on those seqs.
package struct WireMessage: Codable, Hashable, Sendable {
    /// The message types of the demo protocol.
    package enum Kind: String, Codable, Sendable {
        case msg = "MSG"
        case ack = "ACK"
        case hello = "HELLO"
        case welcome = "WELCOME"
        case ping = "PING"
        case pong = "PONG"
        case gap = "GAP"
    }

    /// What this line is.
    package var kind: Kind
    /// The logical stream (outlives TCP connections).
    package var stream: String?
    /// Sequence number of a `MSG`, per stream and direction, from 1.
    package var seq: Int?
    /// Message id of a `MSG` (`c1-up-7`).
    package var id: String?
    /// Application payload of a `MSG`.
    package var payload: String?
    /// Cumulative acknowledgement: every seq ≤ `ack` of the other direction was processed.
    package var ack: Int?
    /// First seq a `GAP` gives up on.
    package var from: Int?
    /// Last seq a `GAP` gives up on.
    package var to: Int?
    /// In `HELLO`: false for a client that does not resume (the naive one).
    package var resume: Bool?

    enum CodingKeys: String, CodingKey {
        case kind = "type"
        case stream, seq, id, payload, ack, from, to, resume
    }

    /// A message of `kind` with the given fields.
    package init(
        _ kind: Kind,
        stream: String? = nil,
        seq: Int? = nil,
        id: String? = nil,
        payload: String? = nil,
        ack: Int? = nil,
        from: Int? = nil,
        to: Int? = nil,
        resume: Bool? = nil
    ) {
        self.kind = kind
        self.stream = stream
        self.seq = seq
        self.id = id
        self.payload = payload
        self.ack = ack
        self.from = from
        self.to = to
        self.resume = resume
    }

    /// A data message of `stream` in `direction` (`up` or `down`).
    package static func data(stream: String, direction: String, seq: Int) -> WireMessage {
        WireMessage(.msg, stream: stream, seq: seq, id: "\(stream)-\(direction)-\(seq)", payload: "tick \(seq)")
    }

    /// The line as sent on the wire, newline included.
    package func encodedLine() -> [UInt8] {
        // Encoding a struct of strings and integers cannot fail; fall back to a PING rather than crash.
        var bytes = (try? WireMessage.encoder.encode(self)).map { [UInt8]($0) } ?? Array(#"{"type":"PING"}"#.utf8)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Parses one line (without its newline); nil when it is not a demo protocol message.
    package init?(line: some Collection<UInt8>) {
        guard let value = try? WireMessage.decoder.decode(WireMessage.self, from: Data(line)) else { return nil }
        self = value
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
    private static let decoder = JSONDecoder()
}
