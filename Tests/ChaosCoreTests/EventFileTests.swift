import ChaosCore
import Foundation
import Testing

/// `events.bin`: every kind of traffic event survives the round trip, the ring stays within its bound and reads back
/// in order across segments, and a damaged file is bad input naming the file and the byte.
@Suite("Event files (events.bin)")
struct EventFileTests {
    static let header = EventFileHeader(
        agent: "a",
        scenario: "s",
        scenarioDigest: "d",
        seed: 9,
        startedAtNs: 1_700_000_000_000_000_000,
        clockErrorUs: 250,
        clockSynchronized: true
    )

    static let everyKind: [TrafficEvent.Kind] = [
        .opened(
            ConnectionEndpoints(
                proxy: "p",
                client: "127.0.0.1:5000",
                listen: "127.0.0.1:7000",
                proxyLocal: "127.0.0.1:6000",
                server: "127.0.0.1:7001"
            )
        ),
        .refused(proxy: "p", reason: "upstream refused · ü"),
        .read(.client, Array("{\"seq\":1}\n".utf8)), .written(.server, []), .acknowledged(.server, upTo: 1 << 40),
        .acknowledgedAfterClose(.client, upTo: 7), .closed(.client, .fin), .closed(.server, .cutByFault), .closed(.server, .resetByProxy),
        .faultStarted(FaultMark(kind: "latency", occurrence: 3, detail: "add=300ms")),
        .faultEnded(FaultMark(kind: "latency", occurrence: FaultMark.apiOccurrence(id: 2, index: 1), detail: "")), .stopping,
        .faultStarted(FaultMark(kind: "partition", occurrence: 4, detail: "direction=both", proxy: "stream")),
        .faultStarted(FaultMark(kind: "partition", occurrence: 5, detail: "", connections: [3, 1 << 40])),
        .faultEnded(FaultMark(kind: "stall", occurrence: 6, detail: "", proxy: "p", draw: ConnectionDraw(probability: 0.25, seed: .max))),
        .path(.radioPromotion(waited: 2_000_000)), .path(.natExpired(idleTimeout: 30, idleFor: 4)),
        .path(.retransmission(.downstream, delay: -5)), .path(.rebound),
        .path(.acknowledgementsCut(.server, upTo: 1234)),
        .path(
            .deadPathSeen(
                DeadPathSeen(
                    lasted: 9_000_000_000,
                    inKernel: true,
                    client: DeadPathLeg(sent: 1 << 33, acknowledged: 0, retransmissions: 7, closedAfter: 3_300_000_000, closedHow: .reset),
                    server: DeadPathLeg(sent: 0, acknowledged: 65_536, retransmissions: 0)
                )
            )
        ),
        .tls(.negotiated(alpn: nil, version: "TLS 1.3", suite: "TLS_AES_128_GCM_SHA256")),
        .tls(.negotiated(alpn: "h2", version: "TLS 1.2", suite: "x")), .tls(.problem("no keys")),
    ]

    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "chaos-events-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func readAll(_ folder: String) throws -> [TrafficEvent] {
        let reader = try EventFileReader(folder: folder)
        var events: [TrafficEvent] = []
        while let event = try reader.next() { events.append(event) }
        return events
    }

    @Test("every kind of event, with extreme times and connection numbers, reads back as written")
    func roundTrip() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let events = Self.everyKind.enumerated().map { index, kind in
            TrafficEvent(time: index == 0 ? Int64.min : Int64(index) * 1_000, connection: index == 1 ? UInt64.max : UInt64(index), kind: kind)
        }
        let writer = try EventFileWriter(folder: folder, header: Self.header)
        for event in events { writer.write(event) }
        writer.close()
        #expect(try Self.readAll(folder) == events)
        #expect(try EventFileReader(folder: folder).header == Self.header)
    }

    @Test("the ring keeps within its bound: the oldest segments go, the rest read back in order, and the reader says what went")
    func ring() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let writer = try EventFileWriter(folder: folder, header: Self.header, ringBytes: 1 << 20)
        let payload = [UInt8](repeating: 7, count: 1_000)
        for index in 0..<5_000 { writer.write(TrafficEvent(time: Int64(index), connection: 1, kind: .read(.client, payload))) }
        writer.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        let bytes = try names.map { try FileManager.default.attributesOfItem(atPath: "\(folder)/\($0)")[.size] as? Int ?? 0 }.reduce(0, +)
        #expect(bytes <= (1 << 20) + (1 << 20) / 16 + 300_000, "\(bytes) bytes in \(names.count) files")
        #expect(writer.segmentsRemoved > 0 && !names.contains("events.bin"), "\(names.sorted())")
        let reader = try EventFileReader(folder: folder)
        #expect(reader.firstSegment == writer.segmentsRemoved)
        var times: [Int64] = []
        while let event = try reader.next() { times.append(event.time) }
        #expect(times == Array(times.first!...4_999), "contiguous up to the last event")
    }

    @Test("damage is bad input naming the file: a foreign file, another version, a cut record, a wrong end count, a missing segment")
    func damage() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let writer = try EventFileWriter(folder: folder, header: Self.header)
        for index in 0..<10 { writer.write(TrafficEvent(time: Int64(index), connection: 1, kind: .read(.client, [1, 2, 3]))) }
        writer.close()
        let path = "\(folder)/events.bin"
        let good = try Data(contentsOf: URL(fileURLWithPath: path))
        func expectBad(_ bytes: Data, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try bytes.write(to: URL(fileURLWithPath: path))
            do {
                _ = try Self.readAll(folder)
                Issue.record("read without complaint; wanted \(message)", sourceLocation: sourceLocation)
            } catch let error as ChaosError {
                #expect(error.message.contains(message) && error.message.contains("events.bin"), "\(error.message)", sourceLocation: sourceLocation)
            }
        }
        try expectBad(Data("PK\u{3}\u{4} a zip".utf8), "is not a chaos event file")
        var version = good
        version[8] = 9
        try expectBad(version, "event format version 9")
        try expectBad(good.prefix(good.count - 3), "is truncated at byte")
        try expectBad(good.prefix(good.count - 13), "no end record")
        var count = good
        count[count.count - 8] = 11  // the end record's count: 11, not 10
        try expectBad(count, "counts 11 records, the file holds 10")
        var kind = good
        let first = 14 + Int(good[10]) + Int(good[11]) << 8
        kind[first + 4] = 99
        try expectBad(kind, "an unknown record kind 99")
        try good.write(to: URL(fileURLWithPath: path))
        try good.write(to: URL(fileURLWithPath: "\(folder)/events.2.bin"))
        #expect(throws: ChaosError.self) { try EventFileReader(folder: folder) }
    }

    @Test("pages (GET /events) rebuild every segment byte for byte, each cut at a record's end; a bad cursor is named")
    func pages() throws {
        let folder = try Self.folder()
        let copy = try Self.folder()
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: copy)
        }
        let writer = try EventFileWriter(folder: folder, header: Self.header, ringBytes: 4 << 20)
        for index in 0..<3_000 {
            writer.write(TrafficEvent(time: Int64(index), connection: 2, kind: .read(.server, [UInt8](repeating: 1, count: 700))))
        }
        writer.close()
        var cursor = "0:0"
        var pages = 0
        while FileManager.default.fileExists(atPath: EventFileWriter.path(folder: folder, segment: Int(cursor.split(separator: ":")[0])!)) {
            let page = try EventFilePage.read(folder: folder, cursor: cursor, limit: 70_000)
            let path = EventFileWriter.path(folder: copy, segment: page.segment)
            if page.offset == 0 { try #require(FileManager.default.createFile(atPath: path, contents: nil)) }
            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.seekToEnd()
            try handle.write(contentsOf: page.bytes)
            try handle.close()
            #expect(page.bytes.count <= 70_000 + 800, "a page stops at the first record end past its limit")
            cursor = page.next
            pages += 1
        }
        #expect(pages > 20 && writer.paths.count > 1, "\(pages) pages of \(writer.paths.count) segments")
        for path in writer.paths {
            let name = (path as NSString).lastPathComponent
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contentsOf: URL(fileURLWithPath: "\(copy)/\(name)")), "\(name)")
        }
        #expect(try Self.readAll(copy).count == 3_000)
        for bad in ["x", "1", "-1:0", "0:x"] {
            #expect(throws: ChaosError.self, "\(bad)") { try EventFilePage.read(folder: folder, cursor: bad) }
        }
        #expect(throws: ChaosError.self) { try EventFilePage.read(folder: folder, cursor: "99:0") }
    }
}
