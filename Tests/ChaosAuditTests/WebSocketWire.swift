@testable import ChaosAudit
@testable import ChaosProtocols

/// Builds WebSocket bytes by hand (RFC 6455 5.2): handshakes and frames in every length form, masked or not,
/// and permessage-deflate payloads compressed with system zlib (RFC 7692 7.2.1).
enum WebSocketWire {
    static func request(target: String = "/feed?session=s9", headers: [String] = ["X-Stream: s1"]) -> [UInt8] {
        let lines =
            [
                "GET \(target) HTTP/1.1", "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade",
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
            ] + headers
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    static func response(status: String = "101 Switching Protocols", extensions: String? = nil) -> [UInt8] {
        var lines = [
            "HTTP/1.1 \(status)", "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
        ]
        if let extensions { lines.append("Sec-WebSocket-Extensions: \(extensions)") }
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    /// One frame; `mask` masks it (client frames), `length` overrides the declared length (a lying header).
    static func frame(
        _ opcode: UInt8,
        _ payload: [UInt8],
        fin: Bool = true,
        rsv1: Bool = false,
        mask: [UInt8]? = nil,
        length: UInt64? = nil
    ) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode]
        let count = length ?? UInt64(payload.count)
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if count < 126 {
            bytes.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            bytes.append(maskBit | 126)
            bytes += [UInt8(count >> 8), UInt8(count & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((count >> UInt64(shift)) & 0xFF)) }
        }
        guard let mask else { return bytes + payload }
        bytes += mask
        return bytes + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    static func text(_ string: String, mask: [UInt8]? = nil) -> [UInt8] { frame(1, Array(string.utf8), mask: mask) }

    static let clientMask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]

    static func close(_ code: UInt16, _ reason: String, mask: [UInt8]? = nil) -> [UInt8] {
        frame(8, [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8), mask: mask)
    }
}

extension WebSocketWire {
    /// One direction's WebSocket messages, compressed with one context (`deflater`) or not, masked from the client.
    struct Leg {
        var bytes: [UInt8]
        let deflater: Deflater?
        let mask: [UInt8]?

        /// `text` as one message: compressed where negotiated (now and then not: RSV1 is per message), cut into
        /// `fragments` frames, a ping frame between the first two.
        mutating func send(_ text: String, binary: Bool = false, fragments: Int = 1, compress: Bool = true) {
            let plain = Array(text.utf8)
            let compressed = compress ? deflater : nil
            let payload = compressed?.compress(plain) ?? plain
            let size = max(1, (payload.count + fragments - 1) / fragments)
            var start = 0
            var first = true
            repeat {
                let end = min(start + size, payload.count)
                let last = end == payload.count
                let opcode: UInt8 = first ? (binary ? 2 : 1) : 0
                bytes += WebSocketWire.frame(opcode, Array(payload[start..<end]), fin: last, rsv1: first && compressed != nil, mask: mask)
                if first, !last { bytes += WebSocketWire.frame(9, Array("p".utf8), mask: mask) }
                first = false
                start = end
            } while start < payload.count
        }
    }
}

extension Deflater {
    /// A compressor for tests: zlib starting is not what they test.
    convenience init(bits: Int32 = 15, takeover: Bool = true) {
        self.init(windowBits: Int(bits), contextTakeover: takeover)!
    }
}

/// What a decoder handed back, with positions made absolute (bytes since the leg began).
enum Decoded: Equatable, CustomStringConvertible {
    case message(String, end: Int, binary: Bool)
    case event(ProtocolEvent, at: Int)
    case problem(DecoderProblem, at: Int)

    var description: String {
        switch self {
        case .message(let text, let end, let binary): "message(\(text.prefix(60)), end: \(end), binary: \(binary))"
        case .event(let event, let at): "event(\(event), at: \(at))"
        case .problem(let problem, let at): "problem(\(problem), at: \(at))"
        }
    }

    /// Feeds `bytes` to `decoder` in pieces of `chunk` bytes (all at once when nil).
    static func feed(_ decoder: any LegDecoder, _ bytes: [UInt8], chunk: Int? = nil) -> [Decoded] {
        var seen: [Decoded] = []
        var start = 0
        let size = chunk ?? max(bytes.count, 1)
        while start < bytes.count {
            let piece = Array(bytes[start..<min(start + size, bytes.count)])
            let base = start
            piece.withUnsafeBufferPointer { buffer in
                decoder.decode(buffer) { output in
                    switch output {
                    case .message(let body, let end, let binary, _):
                        seen.append(.message(String(decoding: body, as: UTF8.self), end: base + end, binary: binary))
                    case .callMessage(let body, let end, _):
                        seen.append(.message(String(decoding: body, as: UTF8.self), end: base + end, binary: true))
                    case .event(let event, let at):
                        var event = event
                        if case .oversized(let bytes, let end) = event { event = .oversized(bytes: bytes, end: base + end) }
                        seen.append(.event(event, at: base + at))
                    case .problem(let problem, let at): seen.append(.problem(problem, at: base + at))
                    case .callEnded: break
                    }
                }
            }
            start += size
        }
        return seen
    }
}
