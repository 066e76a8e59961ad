/// What a gRPC observer saw on a connection, in the order of the bytes that carried it.
public enum GRPCEvent: Equatable, Sendable {
    /// A call began: its HTTP/2 stream, its path (`/package.Service/Method`) and its request metadata.
    case call(stream: UInt32, path: String, metadata: [HTTP2HeaderField])
    /// One length-prefixed message on a call, in the direction fed. `endOffset` is one past the last byte of the
    /// DATA frame that completed it, on that direction's wire (so it is delivered once the receiver's TCP
    /// acknowledged that far).
    case message(stream: UInt32, bytes: [UInt8], compressed: Bool, endOffset: Int64)
    /// A message longer than the cap: counted, not held.
    case oversized(stream: UInt32, length: Int, endOffset: Int64)
    /// A call ended with trailers: `grpc-status` (0 OK, 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED, …) and `grpc-message`.
    case status(stream: UInt32, code: Int, message: String)
    /// The HTTP/2 level: RST_STREAM, GOAWAY, PING, bytes that are not HTTP/2 (see ``HTTP2Event``).
    case http2(HTTP2Event)
}

/// A passive observer of gRPC calls over one HTTP/2 connection: both directions are fed separately (each has its
/// own ``HTTP2DirectionDecoder``), and the calls they share (path, metadata) are tracked here. Memory is
/// bounded: per call and direction at most one message up to ``maxMessage`` bytes is held.
public struct GRPCObserver {
    /// The largest message held; a longer one is reported as ``GRPCEvent/oversized(stream:length:endOffset:)``.
    public let maxMessage: Int
    var client = HTTP2DirectionDecoder(sender: .client)
    var server = HTTP2DirectionDecoder(sender: .server)
    /// Per stream: its path, and the message being assembled in each direction.
    var calls: [UInt32: Call] = [:]

    struct Call {
        var path = ""
        var request = MessageSplitter()
        var response = MessageSplitter()
    }

    /// An observer; messages over `maxMessage` bytes (default 16 MiB) are counted, not held.
    public init(maxMessage: Int = 16 << 20) {
        self.maxMessage = maxMessage
    }

    /// The path of a call seen on `stream`, if any.
    public func path(of stream: UInt32) -> String? { calls[stream]?.path }

    /// Decodes the next bytes the client sent.
    public mutating func feedClient(_ bytes: UnsafeRawBufferPointer) -> [GRPCEvent] {
        handle(client.feed(bytes), fromClient: true)
    }

    /// Decodes the next bytes the server sent.
    public mutating func feedServer(_ bytes: UnsafeRawBufferPointer) -> [GRPCEvent] {
        handle(server.feed(bytes), fromClient: false)
    }

    private mutating func handle(_ events: [HTTP2Event], fromClient: Bool) -> [GRPCEvent] {
        var out: [GRPCEvent] = []
        for event in events {
            switch event {
            case .headers(let stream, let fields, _) where fromClient:
                if calls[stream] == nil {
                    let path = fields.first { $0.name == ":path" }?.value ?? ""
                    calls[stream] = Call(path: path)
                    out.append(.call(stream: stream, path: path, metadata: fields.filter { !$0.name.hasPrefix(":") }))
                }
            case .headers(let stream, let fields, _):
                if let status = fields.first(where: { $0.name == "grpc-status" }).flatMap({ Int($0.value) }) {
                    out.append(.status(stream: stream, code: status,
                                       message: fields.first { $0.name == "grpc-message" }?.value ?? ""))
                    calls[stream] = nil
                }
            case .data(let stream, let payload, _, let endOffset):
                guard calls[stream] != nil else { continue }
                if fromClient {
                    calls[stream]!.request.feed(payload, stream: stream, endOffset: endOffset, cap: maxMessage, into: &out)
                } else {
                    calls[stream]!.response.feed(payload, stream: stream, endOffset: endOffset, cap: maxMessage, into: &out)
                }
            case .reset(let stream, _):
                calls[stream] = nil
                out.append(.http2(event))
            case .goaway, .ping, .protocolError:
                out.append(.http2(event))
            case .preface, .settings:
                break
            }
        }
        return out
    }
}

/// Splits one direction of one call into gRPC's length-prefixed messages (1 byte compressed flag, 4 bytes
/// big-endian length, the message), whatever the DATA frames' boundaries.
struct MessageSplitter {
    var prefix: [UInt8] = []
    var message: [UInt8] = []
    var expected = 0
    var compressed = false
    /// Bytes of an oversized message still to skip.
    var skipping = 0
    var inMessage = false

    mutating func feed(_ payload: [UInt8], stream: UInt32, endOffset: Int64, cap: Int, into out: inout [GRPCEvent]) {
        var index = 0
        while index < payload.count {
            if !inMessage {
                let take = min(5 - prefix.count, payload.count - index)
                prefix.append(contentsOf: payload[index..<(index + take)])
                index += take
                guard prefix.count == 5 else { return }
                compressed = prefix[0] & 1 != 0
                expected = Int(prefix[1]) << 24 | Int(prefix[2]) << 16 | Int(prefix[3]) << 8 | Int(prefix[4])
                prefix.removeAll(keepingCapacity: true)
                inMessage = true
                skipping = expected > cap ? expected : 0
                if skipping == 0 { message.reserveCapacity(min(expected, 1 << 16)) }
            }
            if skipping > 0 || expected > cap {
                let take = min(skipping, payload.count - index)
                skipping -= take
                index += take
                if skipping == 0 {
                    out.append(.oversized(stream: stream, length: expected, endOffset: endOffset))
                    inMessage = false
                }
                continue
            }
            let take = min(expected - message.count, payload.count - index)
            message.append(contentsOf: payload[index..<(index + take)])
            index += take
            if message.count == expected {
                out.append(.message(stream: stream, bytes: message, compressed: compressed, endOffset: endOffset))
                message.removeAll(keepingCapacity: true)
                inMessage = false
            }
        }
    }
}
