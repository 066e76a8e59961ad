import ChaosCapture
import ChaosCore
import Foundation
import Testing

/// `CaptureReader.readPipelined` (what `chaos audit` reads with): the reader on a thread of its own hands over the same
/// events in the same order as `read`, its errors after the events read before them, and stops when the handler fails.
@Suite("CaptureReader.readPipelined: the reader on its own thread")
struct PipelinedReaderTests {
    @Test("the same events, in the same order, and the same statistics as read; more than one batch (capture ring of 20,000 events)")
    func sameEvents() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let writer = try Self.capture(
            in: directory,
            events: (0..<5_000).flatMap { index in
                let bytes = TestSupport.bytes(count: 1 + index % 700, seed: UInt64(index))
                let side: Side = index.isMultiple(of: 3) ? .server : .client
                return [
                    TrafficEvent(time: Int64(index) * 1_000, connection: 1, kind: .read(side, bytes)),
                    TrafficEvent(time: Int64(index) * 1_000 + 500, connection: 1, kind: .written(side.other, bytes)),
                ]
            }
        )
        var plain: [TrafficEvent] = []
        var pipelined: [TrafficEvent] = []
        let plainStatistics = try CaptureReader.read(paths: writer.paths) { plain.append($0) }
        let pipelinedStatistics = try CaptureReader.readPipelined(paths: writer.paths) { pipelined.append($0) }
        #expect(plain.count > 2 * 512, "the events fill several batches: \(plain.count)")
        #expect(plain == pipelined)
        #expect(plainStatistics == pipelinedStatistics)
    }

    @Test("a capture cut inside a record: the events before the cut are handed over, then the reader's bad-input error naming the offset")
    func readerError() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try CaptureReaderTests.writeScriptedCapture(in: directory)
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        let victim = CaptureErrorTests.recordOffsets(bytes).last!
        let cut = directory + "/cut.pcap"
        try Data(bytes[0..<(victim + 5)]).write(to: URL(fileURLWithPath: cut))
        var handled = 0
        do {
            _ = try CaptureReader.readPipelined(paths: [cut]) { _ in handled += 1 }
            Issue.record("reading \(cut) did not fail")
        } catch let error as ChaosError {
            #expect(error.code == .badInput && error.message.contains("at byte offset \(victim)"), "\(error)")
        }
        var before = 0
        _ = try? CaptureReader.read(paths: [cut]) { _ in before += 1 }
        #expect(handled == before && handled > 0, "pipelined \(handled), plain \(before)")
    }

    @Test("a handler that throws stops the reader and its error comes out (no hang, nothing more handled)")
    func handlerError() throws {
        struct Enough: Error {}
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let writer = try Self.capture(
            in: directory,
            events: (0..<3_000).map {
                TrafficEvent(time: Int64($0) * 1_000, connection: 1, kind: .read(.client, TestSupport.bytes(count: 900, seed: 1)))
            }
        )
        var handled = 0
        #expect(throws: Enough.self) {
            _ = try CaptureReader.readPipelined(paths: writer.paths) { _ in
                handled += 1
                if handled == 100 { throw Enough() }
            }
        }
        #expect(handled == 100)
    }

    /// A capture in `directory` of one proxied connection carrying `events` after its opening.
    static func capture(in directory: String, events: [TrafficEvent]) throws -> CaptureWriter {
        let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000)
        writer.record(
            TrafficEvent(
                time: 0,
                connection: 1,
                kind: .opened(
                    ConnectionEndpoints(
                        proxy: "p",
                        client: "127.0.0.1:40000",
                        listen: "127.0.0.1:7000",
                        proxyLocal: "127.0.0.1:50000",
                        server: "127.0.0.1:7001"
                    )
                )
            )
        )
        writer.record(contentsOf: events)
        try writer.close()
        return writer
    }
}
