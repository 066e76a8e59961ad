import Foundation

/// Reads one agent's events back from its run folder (``EventFileWriter``'s ring), segment after segment, a chunk
/// at a time: memory stays at a chunk and a record, whatever the run's length. Every fault in the files (a foreign
/// file, another format version, a segment missing in the middle, a record cut short, a file with no end record) is
/// bad input naming the file and the byte.
package final class EventFileReader {
    /// The first segment's header.
    package let header: EventFileHeader
    /// The segments, oldest first.
    package let paths: [String]
    /// The number of the oldest segment left (above 0: the ring removed the run's first events).
    package let firstSegment: Int

    private var segmentIndex = 0
    private var handle: FileHandle?
    private var buffer: [UInt8] = []
    private var position = 0
    /// The file offset of `buffer`'s first byte.
    private var bufferOffset = 0
    private var recordsInSegment: Int64 = 0
    private var ended = false

    /// Opens the event files of the run folder `folder`.
    package init(folder: String) throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        var numbered: [(Int, String)] = []
        for name in names where name == "events.bin" || (name.hasPrefix("events.") && name.hasSuffix(".bin")) {
            let middle = name.dropFirst("events.".count).dropLast(".bin".count)
            let number = name == "events.bin" ? 0 : Int(middle)
            if let number { numbered.append((number, (folder as NSString).appendingPathComponent(name))) }
        }
        numbered.sort { $0.0 < $1.0 }
        guard let first = numbered.first else {
            throw ChaosError.badInput("\(folder) has no events.bin: it is not the run folder of a chaos agent (chaos run --agent NAME)")
        }
        for (index, entry) in numbered.enumerated() where index > 0 && entry.0 != numbered[index - 1].0 + 1 {
            throw ChaosError.badInput(
                "\(folder): event segment \(numbered[index - 1].0 + 1) is missing (between \(numbered[index - 1].1) and \(entry.1))"
            )
        }
        paths = numbered.map(\.1)
        firstSegment = first.0
        var headers: [EventFileHeader] = []
        for (number, path) in numbered {
            let header = try Self.readHeader(path: path).header
            guard header.segment == number else {
                throw ChaosError.badInput("\(path) says it is segment \(header.segment), not \(number)")
            }
            if let previous = headers.last, previous.agent != header.agent || previous.startedAtNs != header.startedAtNs {
                throw ChaosError.badInput("\(path) is from another run than \(paths[0]) (agent '\(header.agent)', not '\(previous.agent)')")
            }
            headers.append(header)
        }
        header = headers[0]
    }

    /// Reads the header of the segment at `path`; returns it and the offset of its first record.
    package static func readHeader(path: String) throws -> (header: EventFileHeader, end: Int) {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ChaosError.badInput("cannot read \(path)") }
        defer { try? handle.close() }
        let opening = [UInt8]((try? handle.read(upToCount: 14)) ?? Data())
        guard opening.count == 14, Array(opening[0..<8]) == EventFileHeader.magic else {
            throw ChaosError.badInput("\(path) is not a chaos event file (it does not start with CHAOSEVT)")
        }
        let version = UInt16(opening[8]) | UInt16(opening[9]) << 8
        guard version == EventFileHeader.version else {
            throw ChaosError.badInput("\(path) is event format version \(version); this chaos reads version \(EventFileHeader.version)")
        }
        let length = Int(opening[10]) | Int(opening[11]) << 8 | Int(opening[12]) << 16 | Int(opening[13]) << 24
        guard length <= EventFileHeader.largestHeader else {
            throw ChaosError.badInput("\(path): a header of \(length) bytes (at most \(EventFileHeader.largestHeader))")
        }
        let json = (try? handle.read(upToCount: length)) ?? Data()
        guard json.count == length else { throw ChaosError.badInput("\(path) is truncated inside its header") }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            return (try decoder.decode(EventFileHeader.self, from: json), 14 + length)
        } catch {
            throw ChaosError.badInput("\(path): the header does not parse: \(error)")
        }
    }

    /// The next event, or nil after the last segment's end record.
    package func next() throws -> TrafficEvent? {
        while true {
            if ended { return nil }
            if handle == nil { try openSegment() }
            guard let body = try nextBody() else { continue }
            let path = paths[segmentIndex]
            let decoded: EventRecordCoding.Decoded
            do { decoded = try EventRecordCoding.decode(body) } catch {
                throw ChaosError.badInput("\(path): the record at byte \(bufferOffset + position - body.count - 4) is malformed: \(error.reason)")
            }
            switch decoded {
            case .event(let event):
                recordsInSegment += 1
                return event
            case .end(let count):
                guard count == recordsInSegment else {
                    throw ChaosError.badInput("\(path): its end record counts \(count) records, the file holds \(recordsInSegment)")
                }
                try? handle?.close()
                handle = nil
                segmentIndex += 1
                if segmentIndex == paths.count { ended = true }
            }
        }
    }

    private func openSegment() throws {
        let path = paths[segmentIndex]
        let start = try Self.readHeader(path: path).end
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ChaosError.badInput("cannot read \(path)") }
        try handle.seek(toOffset: UInt64(start))
        self.handle = handle
        buffer = []
        position = 0
        bufferOffset = start
        recordsInSegment = 0
    }

    /// The next record body of the open segment.
    private func nextBody() throws -> ArraySlice<UInt8>? {
        let path = paths[segmentIndex]
        guard try fill(4) else {
            throw ChaosError.badInput(
                "\(path) is truncated at byte \(bufferOffset + buffer.count): it has no end record "
                    + "(the agent was killed, or the file was cut)"
            )
        }
        let length = Int(buffer[position]) | Int(buffer[position + 1]) << 8 | Int(buffer[position + 2]) << 16 | Int(buffer[position + 3]) << 24
        guard length > 0, length <= EventRecordCoding.largestRecord else {
            throw ChaosError.badInput("\(path): the record at byte \(bufferOffset + position) declares \(length) bytes")
        }
        guard try fill(4 + length) else {
            throw ChaosError.badInput("\(path) is truncated at byte \(bufferOffset + buffer.count): its last record is cut short")
        }
        let body = buffer[(position + 4)..<(position + 4 + length)]
        position += 4 + length
        return body
    }

    /// Makes `count` bytes available from `position`; false at the end of the file.
    private func fill(_ count: Int) throws -> Bool {
        while buffer.count - position < count {
            if position > 0 {
                buffer.removeFirst(position)
                bufferOffset += position
                position = 0
            }
            let chunk = try handle?.read(upToCount: max(1 << 20, count)) ?? Data()
            if chunk.isEmpty { return false }
            buffer += chunk
        }
        return true
    }
}
