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
        var request = GRPCMessageSplitter()
        var response = GRPCMessageSplitter()
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
                let cap = maxMessage
                func emit(_ piece: GRPCMessageSplitter.Piece) {
                    switch piece {
                    case .message(let bytes, let compressed):
                        out.append(.message(stream: stream, bytes: Array(bytes), compressed: compressed, endOffset: endOffset))
                    case .oversized(let length):
                        out.append(.oversized(stream: stream, length: length, endOffset: endOffset))
                    }
                }
                payload.withUnsafeBufferPointer { bytes in
                    if fromClient {
                        calls[stream]!.request.feed(bytes, cap: cap, emit)
                    } else {
                        calls[stream]!.response.feed(bytes, cap: cap, emit)
                    }
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
