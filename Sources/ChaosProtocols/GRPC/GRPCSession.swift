/// One gRPC call on a connection, as its request headers named it (its HTTP/2 stream, its RPC): shared by the
/// decoders of the connection's four legs (the client's legs read the headers; the server's legs find the call by its
/// HTTP/2 stream id).
final class GRPCCall: RPCCall {
    /// The request metadata (pseudo-headers aside), names lower case.
    let metadata: [HTTP2HeaderField]
    /// Whether its messages are audited (`methods:`, and with descriptors, an RPC the descriptor set knows).
    let audited: Bool
    /// How each direction's compressed messages are compressed (`grpc-encoding`; upstream 0, downstream 1).
    var encodings: [String?] = [nil, nil]
    /// The server ended it (its trailers, END_STREAM) or either side reset it (RST_STREAM).
    var ended = false

    init(streamID: UInt32, path: String, metadata: [HTTP2HeaderField], audited: Bool) {
        self.metadata = metadata
        self.audited = audited
        encodings[0] = metadata.first { $0.name == "grpc-encoding" }?.value
        super.init(streamID: streamID, path: path)
    }

    override func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return metadata.first { $0.name == lowered }?.value
    }
}

/// What the legs of one HTTP/2 connection share: the calls opened on it and the frame size each side allowed.
/// Bounded: the most recent ``callLimit`` calls are kept (stream ids only grow, so the oldest go first).
final class GRPCSession {
    /// The most calls remembered per connection.
    static let callLimit = 4096
    /// The RPCs audited; nil: every RPC.
    let auditedMethods: Set<String>?
    private(set) var calls: [UInt32: GRPCCall] = [:]
    private var order: [UInt32] = []
    private var oldest = 0
    /// Per sender (client 0, server 1): the largest frame it may send (SETTINGS_MAX_FRAME_SIZE of its peer).
    var maxFrameSize = [16_384, 16_384]

    init(auditedMethods: Set<String>?) {
        self.auditedMethods = auditedMethods
    }

    /// The call on `stream`, if its request headers were read.
    @inline(__always)
    func call(_ stream: UInt32) -> GRPCCall? {
        if let recent, recent.stream == stream { return recent.call }
        let found = calls[stream]
        recent = found.map { (stream, $0) }
        return found
    }

    /// Whether an audited call at or below `lastStream` was opened and never ended.
    func hasOpenCalls(upTo lastStream: UInt32) -> Bool {
        calls.values.contains { $0.audited && !$0.ended && $0.streamID <= lastStream }
    }

    /// The call looked up last (a DATA frame's stream is most often the previous one's): no hashing per message.
    private var recent: (stream: UInt32, call: GRPCCall)?

    /// The call whose request headers `fields` are; the first leg to read them makes it, and `isNew` says so.
    func open(_ stream: UInt32, fields: [HTTP2HeaderField]) -> (call: GRPCCall, isNew: Bool) {
        if let existing = calls[stream] { return (existing, false) }
        let path = fields.first { $0.name == ":path" }?.value ?? ""
        let call = GRPCCall(
            streamID: stream,
            path: path,
            metadata: fields.filter { !$0.name.hasPrefix(":") },
            audited: auditedMethods?.contains(path) ?? true
        )
        calls[stream] = call
        order.append(stream)
        if order.count - oldest > Self.callLimit {
            if recent?.stream == order[oldest] { recent = nil }
            calls[order[oldest]] = nil
            oldest += 1
            if oldest > Self.callLimit {
                order.removeFirst(oldest)
                oldest = 0
            }
        }
        return (call, true)
    }
}
