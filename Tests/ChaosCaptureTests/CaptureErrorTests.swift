import ChaosCapture
import ChaosCore
import Foundation
import Testing

@Suite("CaptureReader on broken files")
struct CaptureErrorTests {
    /// Where each record of a classic pcap file starts.
    static func recordOffsets(_ data: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var offset = 24
        while offset + 16 <= data.count {
            offsets.append(offset)
            let caplen =
                Int(data[offset + 8]) | Int(data[offset + 9]) << 8 | Int(data[offset + 10]) << 16
                | Int(data[offset + 11]) << 24
            offset += 16 + caplen
        }
        return offsets
    }

    static func expectBadInput(_ path: String, mentions fragments: [String]) {
        do {
            _ = try CaptureReader.read(path: path) { _ in }
            Issue.record("reading \(path) did not fail")
        } catch let error as ChaosError {
            #expect(error.code == .badInput, "\(error)")
            #expect(error.message.contains(path), "\(error)")
            for fragment in fragments { #expect(error.message.contains(fragment), "\(error)") }
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test(
        "a file cut inside a packet record names the offset where that record starts",
        arguments: [5, 16 + 30]
    )
    func truncatedRecord(cutInto: Int) throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try CaptureReaderTests.writeScriptedCapture(in: directory)
        let data = try #require(FileManager.default.contents(atPath: path))
        let bytes = [UInt8](data)
        let offsets = Self.recordOffsets(bytes)
        let victim = offsets[offsets.count / 2]
        let cut = directory + "/cut.pcap"
        try Data(bytes[0..<(victim + cutInto)]).write(to: URL(fileURLWithPath: cut))
        Self.expectBadInput(cut, mentions: ["truncated", "at byte offset \(victim)"])
    }

    @Test("a record claiming an absurd length is bad input at its offset")
    func corruptRecordLength() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try CaptureReaderTests.writeScriptedCapture(in: directory)
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        let victim = Self.recordOffsets(bytes)[3]
        for index in 8..<16 { bytes[victim + index] = 0x7f }
        let broken = directory + "/broken.pcap"
        try Data(bytes).write(to: URL(fileURLWithPath: broken))
        Self.expectBadInput(broken, mentions: ["at byte offset \(victim)"])
    }

    @Test(
        "garbage, empty and header-only-fragment files are bad input at offset 0",
        arguments: [[UInt8](), TestSupport.bytes(count: 4096, seed: 5), [0xd4, 0xc3, 0xb2, 0xa1, 2, 0]]
    )
    func garbage(contents: [UInt8]) throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = directory + "/garbage.pcap"
        try Data(contents).write(to: URL(fileURLWithPath: path))
        Self.expectBadInput(path, mentions: ["at byte offset 0"])
    }

    @Test("a truncated pcapng file is bad input with an offset")
    func truncatedPcapng() throws {
        let fixture = try #require(CaptureFixtureTests.fixtures.first { $0.file.hasSuffix(".pcapng") })
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: fixture.file)))
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let cut = directory + "/cut.pcapng"
        try Data(bytes[0..<(bytes.count - 37)]).write(to: URL(fileURLWithPath: cut))
        Self.expectBadInput(cut, mentions: ["at byte offset"])
    }

    @Test("a missing file and an unsupported link type are bad input")
    func missingAndUnsupported() throws {
        Self.expectBadInput("/nonexistent/capture.pcap", mentions: ["no such"])
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        // A valid pcap header for link type 105 (IEEE 802.11) and no packets.
        let header: [UInt8] = [
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0xff, 0xff, 0, 0, 105, 0, 0, 0,
        ]
        let path = directory + "/wifi.pcap"
        try Data(header).write(to: URL(fileURLWithPath: path))
        Self.expectBadInput(path, mentions: ["link type 105"])
    }

    @Test("packets with broken IP or TCP headers are skipped, not fatal")
    func brokenPacketsSkipped() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try CaptureReaderTests.writeScriptedCapture(in: directory)
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        let offsets = Self.recordOffsets(bytes)
        // Scramble the IP and TCP headers of one pure ACK packet (record 20) with garbage.
        let victim = offsets[20] + 16
        for (index, byte) in TestSupport.bytes(count: 40, seed: 77).enumerated() { bytes[victim + index] = byte | 0x0f }
        let broken = directory + "/broken.pcap"
        try Data(bytes).write(to: URL(fileURLWithPath: broken))
        let (_, statistics) = try CaptureReader.readAll(path: broken)
        #expect(statistics.packets == offsets.count)
        #expect(statistics.skippedPackets + statistics.tcpSegments == offsets.count)
    }
}
