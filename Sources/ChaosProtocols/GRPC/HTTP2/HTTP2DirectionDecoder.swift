import NIOCore
import NIOHPACK

/// A passive decoder of one direction of a cleartext HTTP/2 connection: fed the bytes as they crossed the
/// proxy, it returns what they carried (``HTTP2Event``). It never sends, never changes a byte and never holds
/// the relay up: it only reads copies.
///
/// It handles the client's preface (prior knowledge) and the h2c upgrade (an HTTP/1.1 request with
/// `Upgrade: h2c` answered by `101 Switching Protocols`), every frame type of RFC 9113 (padding, priority,
/// header blocks split over CONTINUATION frames, unknown types skipped), and HPACK with its dynamic table
/// (NIOHPACK). Memory is bounded: at most one frame (``maxFrameSize`` bytes of payload) and one header block
/// (``maxHeaderBlock``) are held. Bytes that are not HTTP/2 (TLS among them: chaos audits cleartext HTTP/2 only)
/// end decoding with one ``HTTP2Event/protocolError(offset:reason:)``.
package struct HTTP2DirectionDecoder {
    /// Who sends the bytes of this direction.
    package enum Sender: Sendable { case client, server }

    /// The largest header block (HEADERS plus its CONTINUATIONs) held.
    package static let maxHeaderBlock = 1 << 20
    /// The largest HTTP/1.1 head of an h2c upgrade read.
    static let maxUpgradeHead = 1 << 16
    static let preface = HTTP2FrameHeader.preface

    enum Phase { case start, upgradeHead, preface, frames, failed }

    /// The largest frame payload this direction may carry: RFC 9113's `SETTINGS_MAX_FRAME_SIZE` as the receiver
    /// of these bytes announced it. It starts at the protocol's initial 16,384; a frame whose header announces more
    /// ends decoding with one ``HTTP2Event/protocolError(offset:reason:)`` at that frame, before its payload is
    /// waited for. When the peer's SETTINGS (the other direction's) raise the limit, set it here between feeds; it
    /// applies from the next frame not yet decoded. Values past 2^24 - 1, the largest a frame header can state,
    /// change nothing.
    package var maxFrameSize = 16_384

    let sender: Sender
    var phase: Phase = .start
    /// Bytes received and not yet decoded; `pending[consumed...]` is live, starting at wire offset `offset`.
    var pending: [UInt8] = []
    var consumed = 0
    var offset: Int64 = 0
    var hpack: HPACKDecoder
    /// A header block waiting for its CONTINUATION frames: stream, end-of-stream flag, bytes so far, push.
    var block: (stream: UInt32, endStream: Bool, bytes: [UInt8], isPush: Bool)?

    /// A decoder for the direction `sender` writes.
    package init(sender: Sender) {
        self.sender = sender
        // A larger table than the sender's encoder uses is harmless (an encoder never names an entry it
        // evicted); 64 KiB covers every table size a peer is likely to allow in SETTINGS.
        hpack = HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: 1 << 16,
            maxHeaderListSize: Self.maxHeaderBlock
        )
    }

    /// Whether the bytes stopped being HTTP/2 (nothing more is decoded).
    package var failed: Bool { phase == .failed }

    /// Decodes `bytes`, the next bytes of this direction.
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [HTTP2Event] {
        guard phase != .failed, !bytes.isEmpty else { return [] }
        pending.append(contentsOf: bytes)
        var events: [HTTP2Event] = []
        while phase != .failed, step(&events) {}
        if consumed > 0, consumed >= pending.count / 2 {
            pending.removeFirst(consumed)
            consumed = 0
        }
        return events
    }

    var available: Int { pending.count - consumed }

    mutating func advance(_ count: Int) {
        consumed += count
        offset += Int64(count)
    }

    mutating func fail(_ reason: String, _ events: inout [HTTP2Event]) {
        events.append(.protocolError(offset: offset, reason: reason))
        phase = .failed
        pending = []
        consumed = 0
        block = nil
    }

    /// Decodes one unit (the preface, an upgrade head, a frame) if it is all there; false when it waits for more.
    mutating func step(_ events: inout [HTTP2Event]) -> Bool {
        switch phase {
        case .start:
            guard available > 0 else { return false }
            let first = pending[consumed]
            if first == 0x15 || first == 0x16 {  // maybe a TLS record: a handshake or an alert
                guard available >= 6 else { return false }
                if let what = tlsRecord() {
                    fail(
                        "this is TLS (\(what)), not cleartext HTTP/2: chaos audits h2c only (prior knowledge or the h2c upgrade)",
                        &events
                    )
                    return false
                }
            }
            if sender == .client {
                phase = first == UInt8(ascii: "P") ? .preface : .upgradeHead
            } else {
                phase = first == UInt8(ascii: "H") ? .upgradeHead : .frames
            }
            return true
        case .preface:
            let count = min(available, Self.preface.count)
            guard pending[consumed..<(consumed + count)].elementsEqual(Self.preface[..<count]) else {
                fail("not the HTTP/2 connection preface", &events)
                return false
            }
            guard count == Self.preface.count else { return false }
            advance(count)
            events.append(.preface)
            phase = .frames
            return true
        case .upgradeHead:
            return upgradeHead(&events)
        case .frames:
            return frame(&events)
        case .failed:
            return false
        }
    }

    /// What the TLS record at the start of the bytes is (`a ClientHello`, `a ServerHello`, …), or nil when they
    /// do not start with one: content type 22 (handshake) or 21 (alert), then version 3.0 to 3.4. Needs 6 bytes.
    func tlsRecord() -> String? {
        let at = consumed
        guard pending[at + 1] == 0x03, pending[at + 2] <= 0x04 else { return nil }
        guard pending[at] == 0x16 else { return "an alert" }
        switch pending[at + 5] {
        case 1: return "a ClientHello"
        case 2: return "a ServerHello"
        default: return "a handshake record"
        }
    }
}
