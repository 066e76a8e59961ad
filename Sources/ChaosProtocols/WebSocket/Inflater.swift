import CZlib

/// A raw inflate stream (system zlib) for one leg's permessage-deflate messages (RFC 7692 7.2.2): each message's
/// compressed payload, then the 00 00 ff ff that the sender removed. With context takeover the stream carries
/// its window from message to message; without, it is reset after each.
///
/// The output goes to a callback in chunks of at most ``chunk`` bytes: the caller decides what to keep, so a
/// message that inflates to gigabytes costs CPU, never memory.
final class Inflater {
    /// The largest piece of output handed over at once.
    static let chunk = 16 * 1024
    private let stream: UnsafeMutablePointer<z_stream>
    private let output: UnsafeMutablePointer<UInt8>

    /// A raw inflater with an LZ77 window of 2^`windowBits` bytes (9...15); nil when zlib cannot start one.
    convenience init?(windowBits: Int) {
        self.init(zlibWindowBits: -Int32(windowBits))
    }

    /// An inflater of gzip streams (gRPC's `gzip` encoding) or, with `gzip` false, of zlib streams (`deflate`).
    convenience init?(gzip: Bool) {
        self.init(zlibWindowBits: gzip ? 16 + 15 : 15)
    }

    /// zlib's `windowBits` as inflateInit2 takes it: negative for raw deflate, +16 for gzip.
    private init?(zlibWindowBits: Int32) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        output = .allocate(capacity: Self.chunk)
        guard czlib_inflate_init2(stream, zlibWindowBits) == Z_OK else {
            stream.deallocate()
            output.deallocate()
            return nil
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
        output.deallocate()
    }

    /// The 4 bytes RFC 7692 7.2.1 removes from the end of every compressed message.
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    /// Inflates `input` (part of a message's compressed payload); false when it is not a deflate stream.
    func inflate(_ input: UnsafeBufferPointer<UInt8>, _ sink: (UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        guard let base = input.baseAddress, !input.isEmpty else { return true }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: base)
        stream.pointee.avail_in = UInt32(input.count)
        return run(sink)
    }

    /// Ends a message: inflates the removed tail, and resets the window when `reset` (no context takeover).
    func finishMessage(reset: Bool, _ sink: (UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        let ok = Self.tail.withUnsafeBufferPointer { inflate($0, sink) }
        if reset { inflateReset(stream) }
        return ok
    }

    /// Forgets the stream so far: the next input starts a new one.
    func reset() { inflateReset(stream) }

    /// Takes `other`'s stream as its own (its window and where it is in its input), as zlib's `inflateCopy` copies
    /// it; false when zlib could not (this inflater then refuses input, as a stream that is not deflate).
    func adoptState(of other: Inflater) -> Bool {
        inflateEnd(stream)
        return inflateCopy(stream, other.stream) == Z_OK
    }

    private func run(_ sink: (UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        while true {
            stream.pointee.next_out = output
            stream.pointee.avail_out = UInt32(Self.chunk)
            let status = CZlib.inflate(stream, Z_SYNC_FLUSH)
            let produced = Self.chunk - Int(stream.pointee.avail_out)
            if produced > 0 { sink(UnsafeBufferPointer(start: output, count: produced)) }
            switch status {
            case Z_OK:
                if stream.pointee.avail_in == 0, stream.pointee.avail_out > 0 { return true }
            case Z_BUF_ERROR:
                return true  // no progress possible: every input byte was taken
            case Z_STREAM_END:
                // A final block (BFINAL) ends the deflate stream; RFC 7692 allows it: the next message starts anew.
                let rest = Int(stream.pointee.avail_in)
                let next = stream.pointee.next_in
                inflateReset(stream)
                guard rest > 0, let next else { return true }
                stream.pointee.next_in = next
                stream.pointee.avail_in = UInt32(rest)
            default:
                return false
            }
        }
    }
}
