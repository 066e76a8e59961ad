import ChaosCore
import Foundation

/// Where synthesized packets go: one growing `capture.pcap`, or a ring of `capture-NNN.pcap`
/// files whose total size stays within a bound (the oldest file is deleted first), which can be
/// frozen to keep what surrounds an anomaly. Files are classic pcap, or pcapng with `comment` as their section comment.
final class CaptureFileSet {
    /// The smallest ring chaos accepts.
    static let minimumRingBytes = 1 << 20

    private let directory: String
    private let ringBytes: Int?
    private let segmentBytes: Int
    private var closedFiles: [(path: String, bytes: Int)] = []
    private var current: (any CaptureFile)?
    /// The section comment of pcapng files; nil: classic pcap.
    private let comment: String?
    private var nextIndex = 0
    private var frozen = false
    private var full = false
    /// Packets not written because a frozen ring was full.
    private(set) var droppedPackets = 0
    /// Packets written.
    private(set) var writtenPackets = 0

    /// Opens the first file in `directory` (created if missing).
    init(directory: String, ringBytes: Int?, comment: String?) throws {
        if let ringBytes, ringBytes < Self.minimumRingBytes {
            throw ChaosError.badInput("capture ring of \(ringBytes) bytes is too small: it must be at least 1MB")
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw ChaosError(.io, "capture directory \(directory): \(error)")
        }
        self.directory = directory
        self.ringBytes = ringBytes
        self.segmentBytes = ringBytes.map { $0 / 8 } ?? Int.max
        self.comment = comment
        current = try Self.open(nextPath(), comment: comment)
    }

    /// Opens a single file at `path`, with no ring.
    init(path: String, comment: String?) throws {
        directory = (path as NSString).deletingLastPathComponent
        ringBytes = nil
        segmentBytes = Int.max
        self.comment = comment
        current = try Self.open(path, comment: comment)
    }

    /// The files that exist now, oldest first.
    var paths: [String] { closedFiles.map(\.path) + (current.map { [$0.path] } ?? []) }

    /// Total bytes of the files that exist now.
    var totalBytes: Int { closedFiles.reduce(0) { $0 + $1.bytes } + (current?.bytesWritten ?? 0) }

    /// Writes one packet, rotating and pruning the ring as needed.
    func write(_ packet: UnsafeRawBufferPointer, epochNanoseconds: Int64, comment packetComment: String? = nil) throws {
        guard !full, let file = current else {
            droppedPackets += 1
            return
        }
        let recordBytes = file.recordBytes(packet: packet.count, comment: packetComment)
        var target = file
        if let ringBytes {
            if file.bytesWritten + recordBytes > segmentBytes {
                target = try rotate()
            }
            while totalBytes + recordBytes > ringBytes {
                if frozen || closedFiles.isEmpty {
                    full = true
                    target.close()
                    droppedPackets += 1
                    return
                }
                deleteOldest()
            }
        }
        target.write(packet, epochNanoseconds: epochNanoseconds, comment: packetComment)
        writtenPackets += 1
    }

    /// Stops deleting old files. Keeps at most half the ring from before this call, so the other
    /// half holds what follows; once the ring is full, later packets are dropped.
    func freeze() {
        guard let ringBytes, !frozen else { return }
        frozen = true
        while totalBytes > ringBytes / 2, !closedFiles.isEmpty { deleteOldest() }
    }

    /// Flushes the current file.
    func flush() { current?.flush() }

    /// Flushes and closes the current file.
    func close() {
        current?.close()
    }

    private static func open(_ path: String, comment: String?) throws -> any CaptureFile {
        if let comment { return try PcapngFile(path: path, comment: comment) }
        return try PcapDumpFile(path: path)
    }

    private func rotate() throws -> any CaptureFile {
        if let file = current {
            file.close()
            closedFiles.append((file.path, file.bytesWritten))
        }
        let file = try Self.open(nextPath(), comment: comment)
        current = file
        return file
    }

    private func deleteOldest() {
        let oldest = closedFiles.removeFirst()
        try? FileManager.default.removeItem(atPath: oldest.path)
    }

    private func nextPath() -> String {
        defer { nextIndex += 1 }
        let name = ringBytes == nil ? "capture.pcap" : "capture-\(String(format: "%03d", nextIndex)).pcap"
        return (directory as NSString).appendingPathComponent(name)
    }
}
