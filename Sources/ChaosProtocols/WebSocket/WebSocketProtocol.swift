package import ChaosCore

/// `framing: websocket`: RFC 6455 frames after the HTTP/1.1 upgrade; the proxy follows them for `ws-close`.
package enum WebSocketProtocol: ProtocolPlugin {
    package static let names = ["websocket"]
    package static var frames: String? { "websocket" }

    /// `ws-close`: a close frame (`code`) from the proxy at a frame boundary toward `side`, then the connection closed
    /// after `grace`.
    package static let faults = [
        ProtocolFaultDeclaration(
            kind: "ws-close",
            summary: "a WebSocket close frame at the next frame boundary, then the connection closed after a grace time",
            fields: [
                .init(
                    "code",
                    .integer(
                        range: 1000...4999,
                        default: 1012,
                        sendable: sendableCloseCodes,
                        meaning: "a close code an endpoint may send (1000-1003, 1007-1014, 3000-4999)"
                    )
                ),
                .init("side", .choice(["client", "server", "both"], default: "client")),
                .init("grace", .duration(default: .seconds(Int64(5)))),
            ]
        )
    ]

    /// The close codes an endpoint may put in a close frame (RFC 6455 section 7.4: 1004-1006 and 1015 are reserved
    /// for reports, 1016-2999 for the protocol's future).
    package static let sendableCloseCodes: [ClosedRange<Int64>] = [1000...1003, 1007...1014, 3000...4999]

    package static let counters = [
        ProtocolCounter("upgrades", "upgrades"), ProtocolCounter("upgradeFailures", "upgrade failures"),
        ProtocolCounter("pings", "pings"), ProtocolCounter("pongs", "pongs"),
        ProtocolCounter("abnormalClosures", "abnormal closures (1006)"),
    ]
    package static let counterFamilies = [ProtocolCounter("closeCodes", "close codes", note: "1006: the connection ended with no close frame")]

    /// `header:NAME` and `query:NAME` of the upgrade request.
    package static let streamKeyPrefixes = ["header:", "query:"]

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        WebSocketFramer()
    }

    /// Frames after a valid upgrade handshake both ways, permessage-deflate accepted.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        let request = Array("GET /f?s=1 HTTP/1.1\r\nUpgrade: websocket\r\nX-Stream: c1\r\n\r\n".utf8)
        let response = Array("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n".utf8)
        return FuzzSetup(
            spec: ProtocolSpec(framing: .websocket, stream: "header:x-stream", ack: "ack", maxMessage: 4096),
            prelude: [
                .read(.client, request), .written(.server, request), .read(.server, response),
                .written(.client, response),
            ],
            input: input
        )
    }

    package static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking { WebSocketBoundaryTracker() }

    /// `ws-close`: a close frame toward each side it names (masked toward the server, as a client's must be);
    /// toward a side that gets none, nothing more passes once a frame ends: the proxy is closing.
    package static func faultFrames(_ fault: ProtocolFault, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames? {
        guard fault.kind == "ws-close", let code = fault.integer("code").map(Int.init), let side = fault.text("side"),
            let grace = fault.duration("grace")
        else { return nil }
        let toClient = side != "server"
        let toServer = side != "client"
        return FaultFrames(
            toServer: .init(
                frame: toServer ? closeFrame(code: code, masked: true, key: UInt32(truncatingIfNeeded: connection)) : [],
                silenceAfter: true
            ),
            toClient: .init(frame: toClient ? closeFrame(code: code, masked: false) : [], silenceAfter: true),
            grace: grace
        )
    }

    /// A close frame with `code` and a reason naming chaos; `masked` (with `key`) as a client's must be.
    package static func closeFrame(code: Int, masked: Bool, key: UInt32 = 0x6368_616f) -> [UInt8] {
        let payload = [UInt8(code >> 8 & 0xff), UInt8(code & 0xff)] + Array("chaos ws-close".utf8)
        guard masked else { return [0x88, UInt8(payload.count)] + payload }
        let mask = [UInt8(key >> 24), UInt8(key >> 16 & 0xff), UInt8(key >> 8 & 0xff), UInt8(key & 0xff)]
        return [0x88, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }
}

/// A new ``WebSocketSession`` per connection.
struct WebSocketFramer: ProtocolFramer {
    func makeSession() -> any ProtocolSession { WebSocketSession() }

    /// Relayed frames are decoded once for both copies (a `ws-close` fault's own close frame ends that).
    var auditsRelayedReadsOnce: Bool { true }
}

extension WebSocketSession: ProtocolSession {
    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        WebSocketDecoder(upstream: direction == .upstream, session: self, cap: cap)
    }

    func requestHeader(_ name: String) -> String? { header(name) }
    func requestQuery(_ name: String) -> String? { query(name) }
    /// An accepted upgrade whose connection ended with no close frame read either way: abnormal closure (1006).
    func ended(readCount: (String) -> Int) -> [ProtocolEvent] {
        guard accepted == true, readCount("closeCodes") == 0 else { return [] }
        return [.counted("abnormalClosures"), .coded("closeCodes", code: "1006")]
    }
}

extension ProtocolSpec.Framing {
    /// `framing: websocket`.
    package static let websocket = Self(name: WebSocketProtocol.name)
}
