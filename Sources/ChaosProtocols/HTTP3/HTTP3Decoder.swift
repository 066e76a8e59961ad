import ChaosCore

/// One leg of one QUIC stream of an HTTP/3 connection (RFC 9114), fed the stream's bytes in order whatever the
/// packets' boundaries: on a request stream, the frames (HEADERS read with QPACK's static table, DATA whose payloads
/// make the body, every other type skipped) and, in the body, newline-delimited messages (NDJSON over a request or
/// response, as a streaming API sends it). A unidirectional stream (control, QPACK encoder and decoder, push) carries
/// no messages: its type, read first, sets it aside. Memory is bounded: one HEADERS frame (``maxFieldSection``) and
/// one partial message (the cap).
final class HTTP3Decoder: LegDecoder {
    /// The largest HEADERS frame held.
    static let maxFieldSection = 1 << 20

    private enum Phase {
        /// Nothing read yet: the stream's first integer says what it is.
        case start
        case frameType
        case frameLength(type: UInt64)
        case data(remaining: UInt64)
        case headers(length: Int)
        case skip(remaining: UInt64)
        /// A unidirectional stream, or bytes that are not HTTP/3: nothing more is read.
        case ignored
    }

    private var phase = Phase.start
    /// A variable-length integer or a HEADERS payload under way.
    private var pending: [UInt8] = []
    private var body: FrameSplitter
    private let session: HTTP3Session
    private let upstream: Bool
    /// Whether the final HEADERS (a request, a response that is not 1xx) came: DATA before it is not a body.
    private var headed = false

    init(upstream: Bool, session: HTTP3Session, cap: Int) {
        self.upstream = upstream
        self.session = session
        body = FrameSplitter(mode: .lines, maximumFrame: cap)
    }

    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        var position = 0
        while position < input.count {
            switch phase {
            case .ignored:
                return
            case .start:
                guard let first = varint(input, &position) else { return }
                phase = begin(first)
            case .frameType:
                guard let type = varint(input, &position) else { return }
                phase = .frameLength(type: type)
            case .frameLength(let type):
                guard let length = varint(input, &position) else { return }
                phase = frame(type, length: length, at: position, output)
            case .data(let remaining):
                let count = Int(min(remaining, UInt64(input.count - position)))
                let chunk = UnsafeBufferPointer(rebasing: input[position..<(position + count)])
                let base = position
                let problem = body.split(chunk) { message, end in output(.message(message, end: base + end, binary: false)) }
                position += count
                if let problem {
                    output(.problem(.framing(problem), at: position))
                    phase = .ignored
                } else {
                    phase = remaining == UInt64(count) ? .frameType : .data(remaining: remaining - UInt64(count))
                }
            case .headers(let length):
                let count = min(length - pending.count, input.count - position)
                pending.append(contentsOf: UnsafeBufferPointer(rebasing: input[position..<(position + count)]))
                position += count
                guard pending.count == length else { return }
                phase = headers(at: position, output)
                pending.removeAll(keepingCapacity: false)
            case .skip(let remaining):
                let count = Int(min(remaining, UInt64(input.count - position)))
                position += count
                phase = remaining == UInt64(count) ? .frameType : .skip(remaining: remaining - UInt64(count))
            }
        }
    }

    /// What the stream's first integer makes of it: on the client's leg, a unidirectional stream's type (control 0,
    /// QPACK encoder 2, decoder 3) or a request's first frame; on the server's, a response's first frame when the
    /// client's leg opened a request, else a stream the server opened (all unidirectional in HTTP/3).
    private func begin(_ first: UInt64) -> Phase {
        if upstream {
            let unidirectional = first == 0x00 || first == 0x02 || first == 0x03
            if session.kind == nil { session.kind = unidirectional ? .unidirectional : .request }
            return unidirectional ? .ignored : .frameLength(type: first)
        }
        return session.kind == .request ? .frameLength(type: first) : .ignored
    }

    private func frame(_ type: UInt64, length: UInt64, at position: Int, _ output: (DecoderOutput) -> Void) -> Phase {
        switch type {
        case 0x00 where headed:
            return length == 0 ? .frameType : .data(remaining: length)
        case 0x01:
            guard length <= UInt64(Self.maxFieldSection) else {
                output(
                    .problem(
                        .protocolError("an HTTP/3 HEADERS frame of \(length) bytes, over the audit's \(Self.maxFieldSection >> 20) MiB bound"),
                        at: position
                    )
                )
                return .ignored
            }
            return length == 0 ? headers(at: position, output) : .headers(length: Int(length))
        default:
            return length == 0 ? .frameType : .skip(remaining: length)
        }
    }

    /// A HEADERS frame, whole in `pending`: the client's first is its request (the stream's target and headers, for
    /// `stream: query:NAME` / `header:NAME`), the server's a response (its status counted); later ones are trailers.
    private func headers(at position: Int, _ output: (DecoderOutput) -> Void) -> Phase {
        let section: QPACKFieldSection
        do { section = try QPACKFieldSection(decoding: pending, huffman: &session.huffman) } catch {
            output(.problem(.protocolError("an HTTP/3 HEADERS frame whose QPACK field section does not read: \(error)"), at: position))
            return .ignored
        }
        for _ in 0..<section.dynamicReferences { output(.event(.counted("qpackDynamicFields"), at: position)) }
        guard !headed else { return .frameType }
        if upstream {
            headed = true
            session.requested(target: section.value(":path") ?? "/", headers: section.fields)
            output(.event(.counted("h3Requests"), at: position))
            output(.event(.requestRead, at: position))
        } else if let status = section.value(":status") {
            // An interim response (1xx) comes before the final one, which the body follows.
            headed = !status.hasPrefix("1")
            output(.event(.coded("h3Statuses", code: status), at: position))
        }
        return .frameType
    }

    /// A QUIC variable-length integer (RFC 9000 section 16) from `input` at `position`, with the bytes of one begun
    /// in an earlier input; nil: it continues in the next input (its bytes so far kept).
    private func varint(_ input: UnsafeBufferPointer<UInt8>, _ position: inout Int) -> UInt64? {
        let first = pending.first ?? input[position]
        let length = 1 << Int(first >> 6)
        let wanted = min(length - pending.count, input.count - position)
        if pending.isEmpty, wanted == length {
            var value = UInt64(first & 0x3F)
            for index in 1..<length { value = value << 8 | UInt64(input[position + index]) }
            position += length
            return value
        }
        pending.append(contentsOf: UnsafeBufferPointer(rebasing: input[position..<(position + wanted)]))
        position += wanted
        guard pending.count == length else { return nil }
        var value = UInt64(pending[0] & 0x3F)
        for byte in pending.dropFirst() { value = value << 8 | UInt64(byte) }
        pending.removeAll(keepingCapacity: true)
        return value
    }

    var hasPartialMessage: Bool { body.hasPartialFrame }

    func dropPartial() { body.dropPartial() }
}
