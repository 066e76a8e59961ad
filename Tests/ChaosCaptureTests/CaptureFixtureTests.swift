import ChaosCapture
import ChaosCore
import Foundation
import Testing

/// The hand-made captures of Tests/Fixtures/captures/make_captures.py (python3 + scapy).
@Suite("CaptureReader on hand-made captures")
struct CaptureFixtureTests {
    struct Expectation: Decodable, Sendable, CustomTestStringConvertible {
        var name: String
        var file: String
        var link: String
        var up: String
        var down: String
        var loss_bytes: Int
        var loss_holes: Int
        var retransmitted_bytes: Int
        var out_of_order: Int?
        var testDescription: String { name }
    }

    static let generatorPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/captures/make_captures.py").path

    /// Generates the captures once per test run, into a temporary directory.
    static let fixtures: [Expectation] = {
        let directory = NSTemporaryDirectory() + "chaos-capture-fixtures-\(getpid())"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard let output = try? TestSupport.run("/usr/bin/env", ["python3", generatorPath, directory], timeout: 60),
            output.status == 0,
            let data = FileManager.default.contents(atPath: directory + "/manifest.json"),
            let manifest = try? JSONDecoder().decode([Expectation].self, from: data)
        else { return [] }
        return manifest
    }()

    static let names = [
        "reordered-ethernet-ipv4", "retransmitted-sll-ipv6", "overlapping-raw-ipv4",
        "missing-segment-null-ipv6", "reordered-sll2-pcapng",
    ]

    @Test("the generator (python3 + scapy) produced every fixture")
    func generatorRan() {
        #expect(Self.fixtures.map(\.name) == Self.names, "run: pip install scapy")
    }

    @Test("exact byte streams and capture-loss, retransmission and reordering counts", arguments: names)
    func exactReassembly(name: String) throws {
        let fixture = try #require(Self.fixtures.first { $0.name == name })
        let (events, statistics) = try CaptureReader.readAll(
            path: fixture.file,
            options: CaptureReadOptions(pairing: .off)
        )
        #expect(statistics.connections == 1)
        #expect(statistics.skippedPackets == 0)
        let traffic = try #require(ConnectionTraffic.collect(events)[1])
        let up = Self.decodeHex(fixture.up)
        let down = Self.decodeHex(fixture.down)
        #expect(TestSupport.same(traffic.readFromClient, up))
        #expect(TestSupport.same(traffic.writtenToServer, up))
        #expect(TestSupport.same(traffic.readFromServer, down))
        #expect(TestSupport.same(traffic.writtenToClient, down))
        #expect(traffic.closes == ["client:fin", "server:fin"])
        #expect(statistics.captureLossBytes == fixture.loss_bytes)
        #expect(statistics.captureLossHoles == fixture.loss_holes)
        #expect(statistics.retransmittedBytes == fixture.retransmitted_bytes)
        if let outOfOrder = fixture.out_of_order {
            #expect(statistics.outOfOrderSegments == outOfOrder)
        }
        guard case .opened(let endpoints) = events.first?.kind else {
            Issue.record("the first event is not .opened")
            return
        }
        #expect(endpoints.server.hasSuffix(":7001"))
        #expect(endpoints.client.hasSuffix(":40000"))
    }

    static func decodeHex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            if let byte = UInt8(text[index..<next], radix: 16) { bytes.append(byte) }
            index = next
        }
        return bytes
    }
}
