import Foundation

/// Writes an agent's traffic events to a bounded ring of segments in its run folder: `events.bin` first, then
/// `events.1.bin`, `events.2.bin`… each opened by an ``EventFileHeader`` and closed by an end record. When the ring's
/// bytes are spent, the oldest segment is removed (a merge then says the run's start is missing). Buffered: one
/// write per 256 KiB. Not thread-safe: one thread (the audit's) writes.
package final class EventFileWriter {
    /// The smallest ring chaos accepts.
    package static let minimumRingBytes = 1 << 20
    /// The default ring: 4 GiB in 16 segments.
    package static let defaultRingBytes = 4 << 30

    private let folder: String
    private var header: EventFileHeader
    private let segmentBytes: Int
    private let segmentsKept: Int
    private var handle: FileHandle?
    private var buffer: [UInt8] = []
    private var segmentWritten = 0
    private var recordsInSegment: Int64 = 0
    private var segments: [String] = []
    /// Events written, and bytes (all segments, including removed ones).
    package private(set) var events: Int64 = 0
    package private(set) var bytes: Int64 = 0
    /// Segments removed to keep the ring within its bound.
    package private(set) var segmentsRemoved = 0
    /// Why writing stopped early (a full disk…): events after it are not in the ring; nil while all is well.
    package private(set) var failure: String?

    /// The path of segment `number` in `folder`.
    package static func path(folder: String, segment number: Int) -> String {
        (folder as NSString).appendingPathComponent(number == 0 ? "events.bin" : "events.\(number).bin")
    }

    /// Opens the first segment in `folder`. `ringBytes`: the most bytes the segments together may hold.
    package init(folder: String, header: EventFileHeader, ringBytes: Int = EventFileWriter.defaultRingBytes) throws {
        guard ringBytes >= Self.minimumRingBytes else {
            throw ChaosError.badInput("an event ring of \(ringBytes) bytes is too small: it must be at least 1MB")
        }
        self.folder = folder
        self.header = header
        segmentsKept = 16
        segmentBytes = ringBytes / segmentsKept
        try open(segment: 0)
    }

    /// The segments on disk, oldest first.
    package var paths: [String] { segments }

    /// Appends one event.
    package func write(_ event: TrafficEvent) {
        guard handle != nil else { return }
        EventRecordCoding.append(event, to: &buffer)
        recordsInSegment += 1
        events += 1
        if buffer.count >= 256 << 10 { flush() }
        if segmentWritten + buffer.count >= segmentBytes { rotate() }
    }

    /// Writes what is buffered.
    package func flush() {
        guard let handle, !buffer.isEmpty else { return }
        do { try handle.write(contentsOf: buffer) } catch {
            failure = "writing \(segments.last ?? "events.bin") failed after \(events) events: \(error)"
            try? handle.close()
            self.handle = nil
            return
        }
        segmentWritten += buffer.count
        bytes += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    /// Ends the current segment with its end record and closes it.
    package func close() {
        guard handle != nil else { return }
        EventRecordCoding.appendEnd(count: recordsInSegment, to: &buffer)
        flush()
        try? handle?.close()
        handle = nil
    }

    private func rotate() {
        close()
        header.segment += 1
        do { try open(segment: header.segment) } catch {
            failure = "cannot open event segment \(header.segment): \(error)"
            return
        }
        while segments.count > segmentsKept {
            try? FileManager.default.removeItem(atPath: segments.removeFirst())
            segmentsRemoved += 1
        }
    }

    private func open(segment number: Int) throws {
        let path = Self.path(folder: folder, segment: number)
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw ChaosError.badInput("cannot write the event file \(path)")
        }
        self.handle = handle
        segments.append(path)
        segmentWritten = 0
        recordsInSegment = 0
        buffer = try header.encoded()
        flush()
    }
}
