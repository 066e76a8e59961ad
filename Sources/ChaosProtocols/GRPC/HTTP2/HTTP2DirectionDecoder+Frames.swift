import NIOCore
import NIOHPACK

extension HTTP2DirectionDecoder {
    /// One frame, when its 9-byte header and whole payload are there.
    mutating func frame(_ events: inout [HTTP2Event]) -> Bool {
        guard available >= 9 else { return false }
        let h = consumed
        let header = HTTP2FrameHeader(pending, at: h)
        let length = header.length
        let type = header.type
        let flags = header.flags
        let stream = header.stream
        guard length <= maxFrameSize else {
            fail("a \(Self.name(ofType: type)) frame of \(length) bytes, over SETTINGS_MAX_FRAME_SIZE (\(maxFrameSize))", &events)
            return false
        }
        guard available >= 9 + length else { return false }
        let payload = (h + 9)..<(h + 9 + length)
        let frameStart = offset
        let endOffset = frameStart + Int64(9 + length)
        if let block, type != 9 || stream != block.stream {
            fail("a frame of type \(type) on stream \(stream) inside the header block of stream \(block.stream)", &events)
            return false
        }
        switch type {
        case 0:  // DATA
            guard stream != 0, let body = unpadded(payload, flags: flags) else { return bad("DATA", &events) }
            events.append(
                .data(
                    stream: stream,
                    payload: pending[body],
                    endStream: flags & 0x1 != 0,
                    endOffset: endOffset
                )
            )
        case 1:  // HEADERS
            guard stream != 0, var body = unpadded(payload, flags: flags) else { return bad("HEADERS", &events) }
            if flags & 0x20 != 0 {  // PRIORITY: stream dependency and weight come first
                guard body.count >= 5 else { return bad("HEADERS", &events) }
                body = (body.lowerBound + 5)..<body.upperBound
            }
            block = (stream, flags & 0x1 != 0, Array(pending[body]), false)
        case 3:  // RST_STREAM
            guard stream != 0, length == 4 else { return bad("RST_STREAM", &events) }
            events.append(.reset(stream: stream, code: word(payload.lowerBound)))
        case 4:  // SETTINGS
            guard stream == 0, length % 6 == 0, flags & 0x1 == 0 || length == 0 else { return bad("SETTINGS", &events) }
            let values = stride(from: payload.lowerBound, to: payload.upperBound, by: 6).map { at in
                HTTP2Setting(identifier: UInt16(pending[at]) << 8 | UInt16(pending[at + 1]), value: word(at + 2))
            }
            events.append(.settings(ack: flags & 0x1 != 0, values: values))
        case 5:  // PUSH_PROMISE: its header block must be decoded too, to keep the HPACK table in step
            guard stream != 0, let body = unpadded(payload, flags: flags), body.count >= 4 else {
                return bad("PUSH_PROMISE", &events)
            }
            block = (word(body.lowerBound) & 0x7fff_ffff, false, Array(pending[(body.lowerBound + 4)..<body.upperBound]), true)
        case 6:  // PING
            guard stream == 0, length == 8 else { return bad("PING", &events) }
            events.append(
                .ping(
                    ack: flags & 0x1 != 0,
                    opaque: UInt64(word(payload.lowerBound)) << 32
                        | UInt64(word(payload.lowerBound + 4))
                )
            )
        case 7:  // GOAWAY
            guard stream == 0, length >= 8 else { return bad("GOAWAY", &events) }
            let debug = String(decoding: pending[(payload.lowerBound + 8)..<payload.upperBound].prefix(256), as: UTF8.self)
            events.append(
                .goaway(
                    lastStream: word(payload.lowerBound) & 0x7fff_ffff,
                    code: word(payload.lowerBound + 4),
                    debug: debug
                )
            )
        case 9:  // CONTINUATION
            guard block != nil else {
                fail("a CONTINUATION frame on stream \(stream) with no header block open", &events)
                return false
            }
            guard block!.bytes.count + length <= Self.maxHeaderBlock else {
                fail("a header block over \(Self.maxHeaderBlock) bytes", &events)
                return false
            }
            block!.bytes.append(contentsOf: pending[payload])
        default:  // PRIORITY, WINDOW_UPDATE and frame types this version does not know: nothing to audit
            break
        }
        advance(9 + length)
        // HEADERS, PUSH_PROMISE or CONTINUATION with END_HEADERS closes the block.
        if let open = block, [1, 5, 9].contains(type), flags & 0x4 != 0 {
            block = nil
            var buffer = ByteBuffer(bytes: open.bytes)
            do {
                let headers = try hpack.decodeHeaders(from: &buffer)
                if !open.isPush {
                    events.append(
                        .headers(
                            stream: open.stream,
                            fields: headers.map { HTTP2HeaderField($0.name, $0.value) },
                            endStream: open.endStream
                        )
                    )
                }
            } catch {
                offset = frameStart
                fail("a header block HPACK cannot decode (\(error))", &events)
                return false
            }
        }
        return true
    }

    /// A frame type's name in RFC 9113 (`DATA`, `HEADERS`, …), or `type 0xNN` for one it does not define.
    static func name(ofType type: UInt8) -> String {
        let names = [
            "DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY",
            "WINDOW_UPDATE", "CONTINUATION",
        ]
        return type < names.count ? names[Int(type)] : "type 0x" + String(type, radix: 16)
    }

    private mutating func bad(_ type: String, _ events: inout [HTTP2Event]) -> Bool {
        fail("a malformed \(type) frame", &events)
        return false
    }

    /// The payload without its padding (PADDED flag: a pad length byte first, that many bytes last).
    private func unpadded(_ payload: Range<Int>, flags: UInt8) -> Range<Int>? {
        guard flags & 0x8 != 0 else { return payload }
        guard !payload.isEmpty else { return nil }
        let pad = Int(pending[payload.lowerBound])
        guard pad < payload.count else { return nil }
        return (payload.lowerBound + 1)..<(payload.upperBound - pad)
    }

    private func word(_ at: Int) -> UInt32 {
        UInt32(pending[at]) << 24 | UInt32(pending[at + 1]) << 16 | UInt32(pending[at + 2]) << 8 | UInt32(pending[at + 3])
    }

    /// The HTTP/1.1 head of an h2c upgrade: the client's request (reported as stream 1's headers) or the server's
    /// `101 Switching Protocols`. Then the client sends the preface and both sides speak HTTP/2.
    mutating func upgradeHead(_ events: inout [HTTP2Event]) -> Bool {
        let live = pending[consumed...]
        guard let end = live.firstRange(of: [13, 10, 13, 10]) else {
            if available > Self.maxUpgradeHead { fail("an HTTP/1.1 head over \(Self.maxUpgradeHead) bytes", &events) }
            return false
        }
        let lines = String(decoding: pending[consumed..<end.lowerBound], as: UTF8.self)
            .split(separator: "\r\n", omittingEmptySubsequences: false)
        let first = lines.first.map(String.init) ?? ""
        var fields: [HTTP2HeaderField] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            fields.append(
                HTTP2HeaderField(
                    line[..<colon].lowercased(),
                    String(value.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
                )
            )
        }
        let upgrade = fields.first { $0.name == "upgrade" }?.value.lowercased()
        if sender == .client {
            let parts = first.split(separator: " ")
            guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), upgrade == "h2c" else {
                fail("neither the HTTP/2 preface nor an HTTP/1.1 h2c upgrade request", &events)
                return false
            }
            advance(end.upperBound - consumed)
            let request = [HTTP2HeaderField(":method", String(parts[0])), HTTP2HeaderField(":path", String(parts[1]))]
            events.append(
                .headers(
                    stream: 1,
                    fields: request + fields.filter { !["upgrade", "connection", "http2-settings"].contains($0.name) },
                    endStream: true
                )
            )
            phase = .preface
        } else {
            guard first.hasPrefix("HTTP/1.1 101") else {
                fail("the server refused the h2c upgrade (\(first.prefix(80)))", &events)
                return false
            }
            advance(end.upperBound - consumed)
            events.append(.preface)
            phase = .frames
        }
        return true
    }
}
