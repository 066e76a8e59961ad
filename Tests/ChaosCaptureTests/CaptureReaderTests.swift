import ChaosCapture
import ChaosCore
import Foundation
import Testing

@Suite("CaptureReader on captures written by CaptureWriter")
struct CaptureReaderTests {
    /// Writes the scripted run of `CaptureWriterTests` and returns the capture's path.
    static func writeScriptedCapture(in directory: String) throws -> String {
        let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000.25)
        writer.record(contentsOf: CaptureWriterTests.scriptedRun().events)
        try writer.close()
        return directory + "/capture.pcap"
    }

    @Test(
        "paired legs give back exactly the bytes each side of the proxy read and wrote",
        arguments: [CaptureReadOptions.Pairing.automatic, .proxyPort(7000)]
    )
    func pairedRoundTrip(pairing: CaptureReadOptions.Pairing) throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try Self.writeScriptedCapture(in: directory)
        let run = CaptureWriterTests.scriptedRun()

        let (events, statistics) = try CaptureReader.readAll(path: path, options: CaptureReadOptions(pairing: pairing))
        #expect(statistics.connections == 2)
        #expect(statistics.pairedConnections == 2)
        #expect(statistics.flows == 4)
        #expect(statistics.captureLossBytes == 0)
        #expect(statistics.retransmittedBytes == 0)
        #expect(statistics.outOfOrderSegments == 0)
        #expect(statistics.skippedPackets == 0)

        let opened = events.compactMap { event -> ConnectionEndpoints? in
            if case .opened(let endpoints) = event.kind { return endpoints }
            return nil
        }
        let original = run.events.compactMap { event -> ConnectionEndpoints? in
            if case .opened(let endpoints) = event.kind { return endpoints }
            return nil
        }
        #expect(opened.map(\.client) == original.map(\.client))
        #expect(opened.map(\.listen) == original.map(\.listen))
        #expect(opened.map(\.proxyLocal) == original.map(\.proxyLocal))
        #expect(opened.map(\.server) == original.map(\.server))

        let traffic = ConnectionTraffic.collect(events)
        let first = try #require(traffic[1])
        let second = try #require(traffic[2])
        #expect(TestSupport.same(first.readFromClient, run.upstream[0]))
        #expect(TestSupport.same(first.writtenToServer, run.upstream[0]))
        #expect(TestSupport.same(first.readFromServer, run.downstream[0]))
        #expect(TestSupport.same(first.writtenToClient, run.downstream[0]))
        #expect(first.closes == ["client:fin", "server:fin"])
        #expect(TestSupport.same(second.readFromClient, run.upstream[1]))
        #expect(TestSupport.same(second.writtenToServer, run.upstream[1]))
        #expect(second.readFromServer.isEmpty)
        // A fault's cuts: the proxy's RST on the client leg (the peer's own would read `reset`); a FIN cut on the server
        // leg, the proxy's FIN (sent on its own: the client leg's peer had sent none) answered by the server's, read as
        // the live proxy recorded it.
        #expect(second.closes == ["client:reset-by-proxy", "server:cut-by-fault"])

        // Times are relative to the first packet and never run backwards within a connection.
        #expect(events.first?.time == 0)
        for id in [ConnectionID(1), 2] {
            let times = events.filter { $0.connection == id }.map(\.time)
            #expect(times == times.sorted())
        }
        let lastWrite = events.last { if case .written(.server, _) = $0.kind { true } else { false } }
        #expect(lastWrite?.time == 9_000_000, "nanosecond timestamps survive the round trip")
    }

    @Test("without pairing every leg is its own connection whose bytes are both read and written")
    func unpairedRoundTrip() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try Self.writeScriptedCapture(in: directory)
        let run = CaptureWriterTests.scriptedRun()
        let (events, statistics) = try CaptureReader.readAll(path: path, options: CaptureReadOptions(pairing: .off))
        #expect(statistics.connections == 4)
        #expect(statistics.pairedConnections == 0)
        let traffic = ConnectionTraffic.collect(events)
        #expect(traffic.count == 4)
        for (id, index) in [(ConnectionID(1), 0), (2, 0), (3, 1), (4, 1)] {
            let leg = try #require(traffic[id])
            #expect(TestSupport.same(leg.readFromClient, run.upstream[index]))
            #expect(TestSupport.same(leg.writtenToServer, run.upstream[index]))
            #expect(TestSupport.same(leg.readFromServer, run.downstream[index]))
            #expect(TestSupport.same(leg.writtenToClient, run.downstream[index]))
        }
    }

    @Test("a BPF filter keeps only the matching packets, and a bad filter is bad input")
    func filter() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let path = try Self.writeScriptedCapture(in: directory)
        let run = CaptureWriterTests.scriptedRun()
        let (events, statistics) = try CaptureReader.readAll(
            path: path,
            options: CaptureReadOptions(filter: "tcp port 7001 and ip")
        )
        #expect(statistics.flows == 1, "only connection 1's IPv4 server leg")
        #expect(ConnectionTraffic.collect(events)[1]?.writtenToServer == run.upstream[0])

        let error = try #require(throws: ChaosError.self) {
            _ = try CaptureReader.readAll(path: path, options: CaptureReadOptions(filter: "tcp port banana"))
        }
        #expect(error.code == .badInput)
        #expect(error.message.contains("banana"))
    }

    /// 5,000 bytes from the client written to the server and acknowledged, then `closes` (the first at 4 ms, one per
    /// millisecond after), written as a capture and read back: the closes read, and the RSTs tshark counts.
    private func closesReadBack(_ closes: [(Side, TrafficEvent.CloseKind)]) throws -> (closes: [String], resets: Int) {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000)
        let bytes = TestSupport.bytes(count: 5_000, seed: 4)
        let ms: Int64 = 1_000_000
        writer.record(contentsOf: [
            TrafficEvent(time: 0, connection: 1, kind: .opened(Self.loopbackEndpoints)),
            TrafficEvent(time: 1 * ms, connection: 1, kind: .read(.client, bytes)),
            TrafficEvent(time: 2 * ms, connection: 1, kind: .written(.server, bytes)),
            TrafficEvent(time: 3 * ms, connection: 1, kind: .acknowledged(.server, upTo: Int64(bytes.count))),
        ])
        for (index, (side, how)) in closes.enumerated() {
            writer.record(TrafficEvent(time: Int64(4 + index) * ms, connection: 1, kind: .closed(side, how)))
        }
        try writer.close()
        let (events, _) = try CaptureReader.readAll(path: directory + "/capture.pcap")
        let read = events.compactMap { event -> String? in
            if case .closed(let side, let how) = event.kind { return "\(side) \(how.rawValue)" }
            return nil
        }
        let rst = try TestSupport.run("/usr/bin/tshark", ["-n", "-r", directory + "/capture.pcap", "-Y", "tcp.flags.reset == 1"])
        return (read, rst.stdout.split(separator: "\n").count)
    }

    @Test(
        "a FIN cut whose peer answers with a RST (its socket closed with bytes unread): the capture carries the RST after the FINs, read back as the peer's reset, even once every byte was acknowledged"
    )
    func finCutAnsweredWithReset() throws {
        let read = try closesReadBack([(.client, .cutByFault), (.server, .cutByFault), (.server, .reset)])
        #expect(read.closes.last == "server reset", "\(read.closes)")
        #expect(read.resets == 1, "one RST")
    }

    @Test(
        "FINs both ways, then the server's RST after its FIN (it closed behind a partition while the proxy held bytes for it, and reset them when they came): the capture carries the RST, read back as the server's reset"
    )
    func resetAfterFINs() throws {
        let read = try closesReadBack([(.server, .fin), (.client, .fin), (.server, .reset)])
        #expect(read.closes.last == "server reset", "\(read.closes)")
        #expect(read.resets == 1, "one RST")
    }

    /// One proxied connection's endpoints on loopback (proxy p on 7000, its server on 7001).
    static let loopbackEndpoints = ConnectionEndpoints(
        proxy: "p",
        client: "127.0.0.1:40000",
        listen: "127.0.0.1:7000",
        proxyLocal: "127.0.0.1:50000",
        server: "127.0.0.1:7001"
    )

    @Test("the files of a ring are read as one capture")
    func ringFilesReadInOrder() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let writer = try CaptureWriter(directory: directory, ringBytes: 4 << 20, startedAt: 1_700_000_000)
        let endpoints = Self.loopbackEndpoints
        writer.record(TrafficEvent(time: 0, connection: 1, kind: .opened(endpoints)))
        var sent: [UInt8] = []
        for index in 0..<30 {
            let chunk = TestSupport.bytes(count: 50_000, seed: UInt64(index))
            sent += chunk
            writer.record(TrafficEvent(time: Int64(index + 1) * 1_000, connection: 1, kind: .read(.client, chunk)))
            writer.record(TrafficEvent(time: Int64(index + 1) * 1_000 + 500, connection: 1, kind: .written(.server, chunk)))
        }
        try writer.close()
        #expect(writer.paths.count > 1)
        var events: [TrafficEvent] = []
        let statistics = try CaptureReader.read(paths: writer.paths) { events.append($0) }
        let traffic = try #require(ConnectionTraffic.collect(events)[1])
        #expect(TestSupport.same(traffic.readFromClient, sent))
        #expect(TestSupport.same(traffic.writtenToServer, sent))
        #expect(statistics.captureLossBytes == 0)
    }
}
