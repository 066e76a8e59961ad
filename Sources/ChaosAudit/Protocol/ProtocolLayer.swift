import ChaosCore

/// The protocol layer between traffic events and the message extractor: for the scenario's framing, it makes
/// the decoders of each connection's four legs (read from / written to × upstream / downstream).
struct ProtocolLayer {
    enum Kind: Equatable {
        case splitter(FrameSplitter.Mode)
        case websocket
    }

    let kind: Kind
    /// The largest message a leg buffers.
    let cap: Int

    /// The layer for `spec`; throws `ChaosError.badInput` for a framing the audit cannot read.
    init(spec: ProtocolSpec) throws {
        cap = spec.messageCap
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
            throw ChaosError.badInput("protocol.framing grpc is not supported by the audit yet; use lines, length-prefixed or websocket")
        }
    }

    /// A new connection's session (what its handshake decides, shared by its legs), when the protocol has one.
    func makeSession() -> WebSocketSession? { kind == .websocket ? WebSocketSession() : nil }

    /// The decoder of one leg carrying `direction`'s bytes.
    func makeDecoder(_ direction: Direction, session: WebSocketSession?) -> any LegDecoder {
        switch kind {
        case .splitter(let mode): SplitterDecoder(mode: mode, maximumFrame: cap)
        case .websocket: WebSocketDecoder(upstream: direction == .upstream, session: session ?? WebSocketSession(), cap: cap)
        }
    }
}
