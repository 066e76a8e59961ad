package import ChaosCore

/// `framing: auto`: each connection is WebSocket (after an HTTP/1.1 upgrade) or gRPC (over HTTP/2), as its TLS
/// handshake's ALPN says (`http/1.1` or `h2`, from a decrypted capture), else as its first bytes say (an HTTP/2
/// client preface, or an HTTP/1.1 request). One scenario then audits a pair whose clients speak either.
package enum AutoProtocol: ProtocolPlugin {
    package static let names = ["auto"]
    package static let hasRPCs = true

    /// The schema of the RPC framing it picks for an h2 conversation (gRPC's descriptor set).
    package static func loadSchema(path: String) throws -> any MessageSchema { try GRPCProtocol.loadSchema(path: path) }
    package static let streamKeyPrefixes = ["header:", "query:"]

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        AutoFramer(
            websocket: try WebSocketProtocol.framer(spec, auditedMethods: auditedMethods),
            grpc: try GRPCProtocol.framer(spec, auditedMethods: auditedMethods)
        )
    }
}

extension ProtocolSpec.Framing {
    /// `framing: auto`.
    package static let auto = Self(name: AutoProtocol.name)
}

/// A new ``AutoSession`` per connection.
struct AutoFramer: ProtocolFramer {
    let websocket: any ProtocolFramer
    let grpc: any ProtocolFramer

    func makeSession() -> any ProtocolSession { AutoSession(framer: self) }
}

/// One connection of `framing: auto`: undecided until its ALPN or its first bytes tell, then the chosen protocol's
/// session, which its legs' decoders are made from.
final class AutoSession: ProtocolSession {
    private let framer: AutoFramer
    /// The chosen protocol's session, once decided.
    private(set) var chosen: (any ProtocolSession)?

    init(framer: AutoFramer) { self.framer = framer }

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        AutoLegDecoder(session: self, direction: direction, cap: cap)
    }

    func negotiated(alpn: String?) {
        guard chosen == nil, let alpn else { return }
        if alpn == "h2" { chosen = framer.grpc.makeSession() }
        if alpn.hasPrefix("http/1") { chosen = framer.websocket.makeSession() }
    }

    /// Decides from a leg's first bytes when they tell: a client's HTTP/2 preface (`PRI `) or anything else (an
    /// HTTP/1.1 request line); a server's `HTTP/` status line or an HTTP/2 SETTINGS frame.
    func sniff(_ bytes: some Collection<UInt8>, direction: Direction) {
        guard chosen == nil else { return }
        if direction == .upstream {
            guard bytes.count >= 4 else { return }
            chosen = bytes.starts(with: "PRI ".utf8) ? framer.grpc.makeSession() : framer.websocket.makeSession()
        } else {
            guard bytes.count >= 5 else { return }
            if bytes.starts(with: "HTTP/".utf8) {
                chosen = framer.websocket.makeSession()
            } else if bytes[bytes.index(bytes.startIndex, offsetBy: 3)] == 4 {
                chosen = framer.grpc.makeSession()
            }
        }
    }

    func requestHeader(_ name: String) -> String? { chosen?.requestHeader(name) }
    func requestQuery(_ name: String) -> String? { chosen?.requestQuery(name) }
    func ended(readCount: (String) -> Int) -> [ProtocolEvent] { chosen?.ended(readCount: readCount) ?? [] }
}

/// One leg of an `auto` connection: holds its bytes (at most ``limit``) until the session has decided, then hands
/// them and everything after to the chosen protocol's decoder, positions unchanged.
final class AutoLegDecoder: LegDecoder {
    static let limit = 65_536
    private let session: AutoSession
    private let direction: Direction
    private let cap: Int
    private var inner: (any LegDecoder)?
    private var held: [UInt8] = []
    private var failed = false

    init(session: AutoSession, direction: Direction, cap: Int) {
        self.session = session
        self.direction = direction
        self.cap = cap
    }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        if let inner { return inner.decode(input, output) }
        guard !failed else { return }
        if session.chosen == nil {
            if held.isEmpty { session.sniff(input, direction: direction) } else { session.sniff(held + input, direction: direction) }
        }
        guard let chosen = session.chosen else {
            guard held.count + input.count <= Self.limit else {
                failed = true
                return output(
                    .problem(
                        .protocolError(
                            "framing auto: neither an HTTP/1.1 request nor HTTP/2 in the first \(held.count + input.count) bytes, and no ALPN"
                        ),
                        at: input.count
                    )
                )
            }
            held += input
            return
        }
        let decoder = chosen.makeDecoder(direction, cap: cap)
        inner = decoder
        guard !held.isEmpty else { return decoder.decode(input, output) }
        // Positions are in `input`: the held bytes come before it.
        let shift = held.count
        let all = held + input
        held = []
        all.withUnsafeBufferPointer { buffer in
            decoder.decode(buffer) { result in output(Self.shifted(result, by: shift)) }
        }
    }

    private static func shifted(_ output: DecoderOutput, by shift: Int) -> DecoderOutput {
        switch output {
        case .message(let body, let end, let binary, let stream): .message(body, end: end - shift, binary: binary, stream: stream)
        case .callMessage(let body, let end, let call): .callMessage(body, end: end - shift, call: call)
        case .callEnded(let call, let at): .callEnded(call, at: at - shift)
        case .event(.oversized(let bytes, let end), let at): .event(.oversized(bytes: bytes, end: end - shift), at: at - shift)
        case .event(let event, let at): .event(event, at: at - shift)
        case .problem(let problem, let at): .problem(problem, at: at - shift)
        }
    }

    var hasPartialMessage: Bool { inner?.hasPartialMessage ?? false }
    func dropPartial() { inner?.dropPartial() }
}
