import Foundation

/// A page of an agent's event ring as `GET /events?since=CURSOR` serves it: the bytes of one segment file from the
/// cursor on, cut at a record's end (a segment's first page starts with its header), so that a client rebuilds the
/// agent's files byte for byte by appending pages. A cursor is `SEGMENT:OFFSET` (`0:0` is the run's first byte).
package struct EventFilePage: Sendable, Equatable {
    /// The segment the bytes belong to.
    package var segment: Int
    /// The offset in that segment's file of the first byte.
    package var offset: Int
    /// The bytes: whole records (and, at offset 0, the segment's header).
    package var bytes: [UInt8]
    /// Where the next page starts.
    package var next: String
    /// Whether this page holds the segment's end record.
    package var segmentEnded: Bool

    /// Reads at most about `limit` bytes of `folder`'s ring from `cursor`. A malformed cursor, or one whose segment
    /// the ring removed, is bad input naming it.
    package static func read(folder: String, cursor: String, limit: Int = 8 << 20) throws -> EventFilePage {
        let parts = cursor.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let segment = Int(parts[0]), let offset = Int(parts[1]), segment >= 0, offset >= 0 else {
            throw ChaosError.badInput("since must be SEGMENT:OFFSET (such as 0:0), found '\(cursor)'")
        }
        let path = EventFileWriter.path(folder: folder, segment: segment)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ChaosError.badInput("event segment \(segment) is not here (not written yet, or removed by the ring)")
        }
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        let available = [UInt8](try handle.read(upToCount: max(limit, 1 << 16) + (1 << 20)) ?? Data())
        var position = 0
        if offset == 0 {
            guard available.count >= 14 else { return EventFilePage(segment: segment, offset: 0, bytes: [], next: cursor, segmentEnded: false) }
            let length = Int(available[10]) | Int(available[11]) << 8 | Int(available[12]) << 16 | Int(available[13]) << 24
            guard available.count >= 14 + length else {
                return EventFilePage(segment: segment, offset: 0, bytes: [], next: cursor, segmentEnded: false)
            }
            position = 14 + length
        }
        var ended = false
        while available.count - position >= 4, position < limit {
            let length =
                Int(available[position]) | Int(available[position + 1]) << 8 | Int(available[position + 2]) << 16
                | Int(available[position + 3]) << 24
            guard length > 0, available.count - position - 4 >= length else { break }  // a record still being written
            let isEnd = available[position + 4] == EventRecordCoding.endTag
            position += 4 + length
            if isEnd {
                ended = true
                break
            }
        }
        let next = ended ? "\(segment + 1):0" : "\(segment):\(offset + position)"
        return EventFilePage(segment: segment, offset: offset, bytes: Array(available[0..<position]), next: next, segmentEnded: ended)
    }
}
