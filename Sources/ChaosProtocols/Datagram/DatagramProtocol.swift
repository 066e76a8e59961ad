package import ChaosCore

/// `framing: datagram`: each UDP datagram is one message (JSON, text or protobuf, as `format` says), its boundaries
/// the datagram's own. Only a `udp://` proxy's flows keep them: over TCP the reads would join and split messages.
package enum DatagramProtocol: ProtocolPlugin {
    package static let names = ["datagram"]
    package static let readsDatagrams = true

    /// The input is one datagram carrying JSON with a seq.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? { FuzzSetup(spec: ProtocolSpec(framing: .datagram), input: input) }

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        DatagramSession()
    }
}

extension ProtocolSpec.Framing {
    /// `framing: datagram`.
    package static let datagram = Self(name: DatagramProtocol.name)
}

/// The session of a UDP flow: nothing is shared between directions, so one session serves every flow.
final class DatagramSession: ProtocolSession, ProtocolFramer {
    func makeSession() -> any ProtocolSession { self }

    /// The proxy writes nothing of its own into a flow.
    var proxyWritesOnlyRelayedBytes: Bool { true }

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder { DatagramDecoder(cap: cap) }
}

/// Each input (one datagram the proxy read or wrote) is one message; a datagram over the cap is counted, not read.
final class DatagramDecoder: LegDecoder {
    private let cap: Int

    init(cap: Int) { self.cap = cap }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        guard !input.isEmpty else { return }
        guard input.count <= cap else { return output(.event(.oversized(bytes: input.count, end: input.count), at: 0)) }
        output(.message(input, end: input.count, binary: false))
    }

    /// A datagram is whole or absent.
    var hasPartialMessage: Bool { false }

    func dropPartial() {}

    var canHandOverState: Bool { true }

    func adoptState(of other: any LegDecoder) -> Bool { other is DatagramDecoder }
}
