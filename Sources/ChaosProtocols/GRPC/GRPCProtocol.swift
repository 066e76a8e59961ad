package import ChaosCore

/// `framing: grpc`: gRPC over cleartext HTTP/2 (prior knowledge or the h2c upgrade); the proxy follows the
/// HTTP/2 frames for `goaway`.
package enum GRPCProtocol: ProtocolPlugin {
    package static let names = ["grpc"]
    package static var frames: String? { "http2" }

    /// `goaway`: an HTTP/2 GOAWAY to the client at a frame boundary, as a draining server sends, then the connection
    /// closed after `grace`.
    package static let faults = [
        ProtocolFaultDeclaration(
            kind: "goaway",
            summary: "an HTTP/2 GOAWAY to the client at the next frame boundary, then the connection closed after a grace time",
            fields: [.init("grace", .duration(default: .seconds(Int64(5))))]
        )
    ]

    package static let defaultFormat = ProtocolSpec.Format.protobuf
    package static let defaultStream = "rpc"
    package static let hasRPCs = true

    /// `descriptors:` a FileDescriptorSet (`protoc --include_imports -o FILE …`) that names the fields of each RPC's
    /// request and response.
    package static func loadSchema(path: String) throws -> any MessageSchema { try ProtobufSchema.load(path: path) }
    /// `header:NAME`: a metadata header of the call.
    package static let streamKeyPrefixes = ["header:"]

    package static let counters = [
        ProtocolCounter("calls", "gRPC calls"), ProtocolCounter("upgrades", "upgrades"),
        ProtocolCounter("upgradeFailures", "upgrade failures"), ProtocolCounter("pings", "pings"),
        ProtocolCounter("pongs", "pongs"),
    ]
    package static let counterFamilies = [
        ProtocolCounter("grpcStatuses", "gRPC statuses"), ProtocolCounter("goaways", "HTTP/2 GOAWAY"),
        ProtocolCounter("streamResets", "HTTP/2 RST_STREAM"),
    ]

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        GRPCFramer(auditedMethods: auditedMethods)
    }

    /// Client and server bytes after a preface, SETTINGS and one call's request and response HEADERS, gzip accepted.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        FuzzSetup(
            spec: ProtocolSpec(
                framing: .grpc,
                format: .protobuf,
                seq: "2",
                stream: "header:x-session",
                ack: "3",
                downstream: .init(seq: "3", ack: "6"),
                maxMessage: 4096
            ),
            prelude: GRPCFuzzPrelude.events,
            input: input
        )
    }

    package static func boundaryTracker(producer: Side) -> any FrameBoundaryTracking { HTTP2BoundaryTracker(producer: producer) }

    /// `goaway`: a GOAWAY (NO_ERROR) to the client naming the highest stream it opened, as a draining server sends.
    package static func faultFrames(_ fault: ProtocolFault, connection: UInt64, client: any FrameBoundaryTracking) -> FaultFrames? {
        guard fault.kind == "goaway", let grace = fault.duration("grace") else { return nil }
        let last = (client as? HTTP2BoundaryTracker)?.highestStream ?? 0
        return FaultFrames(
            toServer: nil,
            toClient: .init(frame: goawayFrame(lastStream: last), silenceAfter: false),
            grace: grace
        )
    }

    /// A GOAWAY (NO_ERROR) naming `lastStream` as the last stream processed.
    package static func goawayFrame(lastStream: UInt32) -> [UInt8] {
        let last = lastStream & 0x7fff_ffff
        return [0, 0, 8, 7, 0, 0, 0, 0, 0] + [UInt8(last >> 24), UInt8(last >> 16 & 0xff), UInt8(last >> 8 & 0xff), UInt8(last & 0xff)]
            + [0, 0, 0, 0]
    }
}

/// A new ``GRPCSession`` per connection, auditing `auditedMethods` (nil: every RPC).
struct GRPCFramer: ProtocolFramer {
    let auditedMethods: Set<String>?

    func makeSession() -> any ProtocolSession { GRPCSession(auditedMethods: auditedMethods) }
}

extension GRPCSession: ProtocolSession {
    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        GRPCDecoder(upstream: direction == .upstream, session: self, cap: cap)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: grpc`.
    package static let grpc = Self(name: GRPCProtocol.name)
}
