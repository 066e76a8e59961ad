/// The frames of a QUIC packet's payload (RFC 9000 §19, and RFC 9221's DATAGRAM): what the audit reads (STREAM and
/// CRYPTO data by offset, the receiver's ACKs, the path's challenges, the connection's IDs and its close), and the
/// rest named so that a packet parses to its end.
package enum QUICFrame: Equatable, Sendable {
    /// PADDING: `count` zero bytes in a row.
    case padding(count: Int)
    case ping
    /// ACK: the packet numbers acknowledged, highest range first; the ECN counts when the frame carries them.
    case ack(ranges: [ClosedRange<UInt64>], delay: UInt64, ecn: [UInt64]?)
    case resetStream(stream: UInt64, code: UInt64, finalSize: UInt64)
    case stopSending(stream: UInt64, code: UInt64)
    case crypto(offset: UInt64, data: [UInt8])
    case newToken([UInt8])
    case stream(id: UInt64, offset: UInt64, data: [UInt8], fin: Bool)
    case maxData(UInt64)
    case maxStreamData(stream: UInt64, limit: UInt64)
    case maxStreams(bidirectional: Bool, limit: UInt64)
    case dataBlocked(UInt64)
    case streamDataBlocked(stream: UInt64, limit: UInt64)
    case streamsBlocked(bidirectional: Bool, limit: UInt64)
    case newConnectionID(sequence: UInt64, retirePriorTo: UInt64, id: [UInt8], resetToken: [UInt8])
    case retireConnectionID(sequence: UInt64)
    case pathChallenge([UInt8])
    case pathResponse([UInt8])
    /// CONNECTION_CLOSE: a transport error (with the frame type that caused it) or, `application`, the app's.
    case connectionClose(code: UInt64, frameType: UInt64?, reason: [UInt8], application: Bool)
    case handshakeDone
    case datagram([UInt8])

    package enum Failure: Error, Equatable, CustomStringConvertible {
        case truncated(frameType: UInt64, at: Int)
        case unknownType(UInt64, at: Int)
        case badAckRange(at: Int)

        package var description: String {
            switch self {
            case .truncated(let type, let at): "a QUIC frame of type 0x\(String(type, radix: 16)) cut short at byte \(at) of its payload"
            case .unknownType(let type, let at): "an unknown QUIC frame type 0x\(String(type, radix: 16)) at byte \(at) of its payload"
            case .badAckRange(let at): "an ACK frame whose ranges go below packet number 0, at byte \(at) of its payload"
            }
        }
    }

    /// Whether a packet carrying it must be acknowledged (RFC 9000 §13.2.1: all but ACK, PADDING and CONNECTION_CLOSE).
    package var isAckEliciting: Bool {
        switch self {
        case .ack, .padding, .connectionClose: false
        default: true
        }
    }

    /// The frames of a decrypted payload, in order.
    package static func parse(_ payload: [UInt8]) throws -> [QUICFrame] {
        var reader = ByteReader(payload[...])
        var frames: [QUICFrame] = []
        while !reader.isAtEnd {
            let at = payload.count - reader.rest.count
            guard let type = reader.varInt() else { throw Failure.truncated(frameType: 0, at: at) }
            guard let frame = try frame(type, &reader, at: at) else { throw Failure.truncated(frameType: type, at: at) }
            frames.append(frame)
        }
        return frames
    }

    /// One frame of `type`, its type already read; nil when the payload ends inside it.
    private static func frame(_ type: UInt64, _ reader: inout ByteReader, at: Int) throws -> QUICFrame? {
        func bytes(_ count: UInt64?) -> [UInt8]? {
            guard let count, count <= UInt64(reader.rest.count) else { return nil }
            return reader.take(Int(count)).map(Array.init)
        }
        switch type {
        case 0x00:
            var count = 1
            while reader.rest.first == 0 {
                _ = reader.take(1)
                count += 1
            }
            return .padding(count: count)
        case 0x01: return .ping
        case 0x02, 0x03:
            guard let largest = reader.varInt(), let delay = reader.varInt(), let count = reader.varInt(), let first = reader.varInt()
            else { return nil }
            guard first <= largest else { throw Failure.badAckRange(at: at) }
            var ranges = [(largest - first)...largest]
            var smallest = largest - first
            for _ in 0..<count {
                guard let gap = reader.varInt(), let length = reader.varInt() else { return nil }
                guard smallest >= gap + 2, smallest - gap - 2 >= length else { throw Failure.badAckRange(at: at) }
                let high = smallest - gap - 2
                smallest = high - length
                ranges.append(smallest...high)
            }
            var ecn: [UInt64]?
            if type == 0x03 {
                guard let ect0 = reader.varInt(), let ect1 = reader.varInt(), let ce = reader.varInt() else { return nil }
                ecn = [ect0, ect1, ce]
            }
            return .ack(ranges: ranges, delay: delay, ecn: ecn)
        case 0x04:
            guard let stream = reader.varInt(), let code = reader.varInt(), let size = reader.varInt() else { return nil }
            return .resetStream(stream: stream, code: code, finalSize: size)
        case 0x05:
            guard let stream = reader.varInt(), let code = reader.varInt() else { return nil }
            return .stopSending(stream: stream, code: code)
        case 0x06:
            guard let offset = reader.varInt(), let data = bytes(reader.varInt()) else { return nil }
            return .crypto(offset: offset, data: data)
        case 0x07:
            guard let token = bytes(reader.varInt()) else { return nil }
            return .newToken(token)
        case 0x08...0x0F:
            guard let id = reader.varInt() else { return nil }
            var offset: UInt64 = 0
            if type & 0x04 != 0 {
                guard let value = reader.varInt() else { return nil }
                offset = value
            }
            let data: [UInt8]
            if type & 0x02 != 0 {
                guard let counted = bytes(reader.varInt()) else { return nil }
                data = counted
            } else {
                data = Array(reader.rest)  // to the end of the packet
                _ = reader.take(reader.rest.count)
            }
            return .stream(id: id, offset: offset, data: data, fin: type & 0x01 != 0)
        case 0x10:
            return reader.varInt().map { .maxData($0) }
        case 0x11:
            guard let stream = reader.varInt(), let limit = reader.varInt() else { return nil }
            return .maxStreamData(stream: stream, limit: limit)
        case 0x12, 0x13:
            return reader.varInt().map { .maxStreams(bidirectional: type == 0x12, limit: $0) }
        case 0x14:
            return reader.varInt().map { .dataBlocked($0) }
        case 0x15:
            guard let stream = reader.varInt(), let limit = reader.varInt() else { return nil }
            return .streamDataBlocked(stream: stream, limit: limit)
        case 0x16, 0x17:
            return reader.varInt().map { .streamsBlocked(bidirectional: type == 0x16, limit: $0) }
        case 0x18:
            guard let sequence = reader.varInt(), let retire = reader.varInt(), let length = reader.number(1), (1...20).contains(length),
                let id = reader.take(length), let token = reader.take(16)
            else { return nil }
            return .newConnectionID(sequence: sequence, retirePriorTo: retire, id: Array(id), resetToken: Array(token))
        case 0x19:
            return reader.varInt().map { .retireConnectionID(sequence: $0) }
        case 0x1A:
            return reader.take(8).map { .pathChallenge(Array($0)) }
        case 0x1B:
            return reader.take(8).map { .pathResponse(Array($0)) }
        case 0x1C, 0x1D:
            guard let code = reader.varInt() else { return nil }
            var frameType: UInt64?
            if type == 0x1C {
                guard let value = reader.varInt() else { return nil }
                frameType = value
            }
            guard let reason = bytes(reader.varInt()) else { return nil }
            return .connectionClose(code: code, frameType: frameType, reason: reason, application: type == 0x1D)
        case 0x1E:
            return .handshakeDone
        case 0x30:
            let data = Array(reader.rest)
            _ = reader.take(reader.rest.count)
            return .datagram(data)
        case 0x31:
            return bytes(reader.varInt()).map { .datagram($0) }
        default:
            throw Failure.unknownType(type, at: at)
        }
    }
}
