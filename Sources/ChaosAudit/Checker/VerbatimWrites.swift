/// Which bytes written to a consumer are known to be the bytes read from its producer, at the same offsets, without
/// comparing them: the relay (or a capture's standalone connection) hands over the read's own buffer as the write's
/// when it writes a read whole. A written message wholly inside such bytes takes its read copy's fields without
/// hashing its bytes again (``ReadCopies/take(endingAt:_:sameBytes:)``).
struct VerbatimWrites {
    /// On a `sent` pipe: the last read, kept alive so that its buffer's address cannot be reused by another array
    /// while a write may still be compared with it, and the offset it started at (until the next write).
    private var lastRead: [UInt8] = []
    private var lastReadStart: Int64 = -1
    /// On a `delivered` pipe: the written bytes `writtenSince..<writtenEnd` are the read bytes at the same offsets.
    private(set) var writtenSince: Int64 = .max
    private var writtenEnd: Int64 = -1

    /// `bytes` were read from the producer, starting at offset `start`.
    @inline(__always)
    mutating func read(_ bytes: [UInt8], at start: Int64) {
        lastRead = bytes
        lastReadStart = start
    }

    /// Lets the last read go once a write was compared with it: the buffer is kept only between a read and the next
    /// write of its direction (at most one read per direction, as the relay holds), never for an idle connection.
    @inline(__always)
    mutating func forgetRead() {
        lastRead = []
        lastReadStart = -1
    }

    /// `bytes` were written to the consumer at offset `start`; `lastRead` is the producer's `sent` pipe's record.
    /// They extend the verbatim span when they are that read's very buffer, at the offset it was read at.
    @inline(__always)
    mutating func written(_ bytes: [UInt8], at start: Int64, lastRead: VerbatimWrites) {
        let same =
            start == lastRead.lastReadStart && bytes.count == lastRead.lastRead.count && !bytes.isEmpty
            && bytes.withUnsafeBufferPointer { written in
                lastRead.lastRead.withUnsafeBufferPointer { $0.baseAddress == written.baseAddress }
            }
        if !same {
            writtenSince = .max
            writtenEnd = -1
            return
        }
        if writtenEnd != start { writtenSince = start }
        writtenEnd = start + Int64(bytes.count)
    }
}
