import ChaosCore

@testable import ChaosProtocols

/// One leg of a gRPC connection through the gRPC plug-in's decoder: what it gave, message ends as offsets from
/// the leg's first byte, whatever the reads.
final class GRPCLegProbe {
    enum Seen: Equatable {
        case message(stream: UInt32, bytes: [UInt8], end: Int64)
        case event(ProtocolEvent)
        case problem(DecoderProblem)
        /// The leg's sender ended the call on this HTTP/2 stream (the server's trailers, either side's reset).
        case ended(stream: UInt32)

        var isMessage: Bool { if case .message = self { true } else { false } }
        var isEnded: Bool { if case .ended = self { true } else { false } }
    }

    private let decoder: any LegDecoder
    private var fed: Int64 = 0

    init(_ session: GRPCSession, _ direction: Direction, cap: Int = 16 << 20) {
        decoder = session.makeDecoder(direction, cap: cap)
    }

    func feed(_ bytes: [UInt8]) -> [Seen] {
        var seen: [Seen] = []
        let base = fed
        fed += Int64(bytes.count)
        bytes.withUnsafeBufferPointer { buffer in
            decoder.decode(buffer) { output in
                switch output {
                case .message(let body, let end, _, _): seen.append(.message(stream: 0, bytes: Array(body), end: base + Int64(end)))
                case .callMessage(let body, let end, let call):
                    seen.append(.message(stream: call.streamID, bytes: Array(body), end: base + Int64(end)))
                case .event(let event, _): seen.append(.event(event))
                case .problem(let problem, _): seen.append(.problem(problem))
                case .callEnded(let call, _): seen.append(.ended(stream: call.streamID))
                }
            }
        }
        return seen
    }

    /// Feeds `bytes` in reads of `chunk` bytes.
    func feed(_ bytes: [UInt8], chunk: Int) -> [Seen] {
        stride(from: 0, to: bytes.count, by: chunk).flatMap { feed(Array(bytes[$0..<min(bytes.count, $0 + chunk)])) }
    }
}
