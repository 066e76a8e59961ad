import ChaosCore

/// The protocol layer between traffic events and the message extractor: for the scenario's framing, it makes
/// the decoders of each connection's four legs (read from / written to × upstream / downstream).
struct ProtocolLayer {
    enum Kind: Equatable {
        case splitter(FrameSplitter.Mode)
        case websocket
        case grpc
    }

    let kind: Kind
    /// The largest message a leg buffers.
    let cap: Int
    /// gRPC: the descriptor set that names fields (`descriptors:`).
    let schema: ProtobufSchema?
    /// gRPC: the RPCs audited (`methods:`, and with descriptors only those it describes); nil: every RPC.
    let auditedMethods: Set<String>?

    /// The layer for `spec`; throws `ChaosError.badInput` for a framing the audit cannot read.
    init(spec: ProtocolSpec) throws {
        cap = spec.messageCap
        schema = try spec.descriptors.map { try ProtobufSchema.load(path: $0) }
        var methods = spec.methods.map(Set.init)
        if let schema { methods = (methods ?? Set(schema.methods.keys)).intersection(schema.methods.keys) }
        auditedMethods = methods
        switch spec.framing {
        case .lines:
            kind = .splitter(.lines)
        case .lengthPrefixed(let bytes, let offset):
            guard [1, 2, 4].contains(bytes) else {
                throw ChaosError.badInput("protocol.framing length-prefixed needs a 1, 2 or 4 byte length, found \(bytes)")
            }
            kind = .splitter(.lengthPrefixed(bytes: bytes, offset: offset))
        case .websocket:
            kind = .websocket
        case .grpc:
            kind = .grpc
        }
    }

    /// A new connection's sessions (what its handshake decides, shared by its legs), for the protocols that have one.
    func makeSessions() -> (websocket: WebSocketSession?, grpc: GRPCSession?) {
        switch kind {
        case .splitter: (nil, nil)
        case .websocket: (WebSocketSession(), nil)
        case .grpc: (nil, GRPCSession(auditedMethods: auditedMethods))
        }
    }

    /// The decoder of one leg carrying `direction`'s bytes.
    func makeDecoder(_ direction: Direction, websocket: WebSocketSession?, grpc: GRPCSession?) -> any LegDecoder {
        switch kind {
        case .splitter(let mode): SplitterDecoder(mode: mode, maximumFrame: cap)
        case .websocket: WebSocketDecoder(upstream: direction == .upstream, session: websocket ?? WebSocketSession(), cap: cap)
        case .grpc: GRPCDecoder(upstream: direction == .upstream, session: grpc ?? GRPCSession(auditedMethods: auditedMethods), cap: cap)
        }
    }
}
