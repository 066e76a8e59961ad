import ChaosCapture
import ChaosCore
import Foundation
import Testing

@Suite("CaptureWriter")
struct CaptureWriterTests {
    /// A run with two proxied connections: data both ways on both legs, a chunk larger than one
    /// segment, one connection closed with FINs, the other cut by a fault.
    static func scriptedRun() -> (events: [TrafficEvent], upstream: [[UInt8]], downstream: [[UInt8]]) {
        let big = TestSupport.bytes(count: 150_000, seed: 1)
        let hello = Array("HELLO\n".utf8)
        let reply = TestSupport.bytes(count: 3_000, seed: 2)
        let second = TestSupport.bytes(count: 777, seed: 3)
        let endpoints1 = ConnectionEndpoints(
            proxy: "stream",
            client: "127.0.0.1:40001",
            listen: "127.0.0.1:7000",
            proxyLocal: "127.0.0.1:50001",
            server: "127.0.0.1:7001"
        )
        let endpoints2 = ConnectionEndpoints(
            proxy: "stream",
            client: "[::1]:40002",
            listen: "[::1]:7000",
            proxyLocal: "[::1]:50002",
            server: "[::1]:7001"
        )
        let ms: Int64 = 1_000_000
        let events: [TrafficEvent] = [
            TrafficEvent(time: 0, connection: 1, kind: .opened(endpoints1)),
            TrafficEvent(time: 1 * ms, connection: 1, kind: .read(.client, hello)),
            TrafficEvent(time: 2 * ms, connection: 1, kind: .written(.server, hello)),
            TrafficEvent(time: 3 * ms, connection: 1, kind: .read(.server, reply)),
            TrafficEvent(time: 4 * ms, connection: 1, kind: .written(.client, reply)),
            TrafficEvent(time: 5 * ms, connection: 2, kind: .opened(endpoints2)),
            TrafficEvent(time: 6 * ms, connection: 1, kind: .read(.client, big)),
            TrafficEvent(time: 7 * ms, connection: 2, kind: .read(.client, second)),
            TrafficEvent(time: 8 * ms, connection: 1, kind: .written(.server, big)),
            TrafficEvent(time: 9 * ms, connection: 2, kind: .written(.server, second)),
            TrafficEvent(time: 10 * ms, connection: 1, kind: .closed(.client, .fin)),
            TrafficEvent(time: 11 * ms, connection: 1, kind: .closed(.server, .fin)),
            TrafficEvent(time: 12 * ms, connection: 2, kind: .closed(.client, .resetByFault)),
            TrafficEvent(time: 12 * ms, connection: 2, kind: .closed(.server, .cutByFault)),
        ]
        return (events, [hello + big, second], [reply, []])
    }

    @Test("tshark reads the synthesized capture with no malformed packets and follows every stream's bytes")
    func tsharkReadsCapture() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let run = Self.scriptedRun()
        let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000)
        writer.record(contentsOf: run.events)
        try writer.close()
        let path = directory + "/capture.pcap"
        #expect(writer.paths == [path])

        let listing = try TestSupport.run(
            "/usr/bin/tshark",
            [
                "-n", "-r", path, "-o", "tcp.check_checksum:TRUE",
                "-o", "ip.check_checksum:TRUE",
            ]
        )
        #expect(listing.status == 0)
        #expect(!listing.stdout.lowercased().contains("malformed"))
        #expect(!listing.stdout.lowercased().contains("bad"))
        #expect(!listing.stdout.contains("[TCP ACKed unseen"))
        #expect(!listing.stdout.contains("[TCP Previous segment not captured"))

        // tcp.stream 0/1: connection 1's client and server leg; 2/3: connection 2's.
        let expected: [(stream: Int, toServer: [UInt8], toClient: [UInt8])] = [
            (0, run.upstream[0], run.downstream[0]), (1, run.upstream[0], run.downstream[0]),
            (2, run.upstream[1], run.downstream[1]), (3, run.upstream[1], run.downstream[1]),
        ]
        for stream in expected {
            let follow = try Tshark.follow(path: path, stream: stream.stream)
            #expect(TestSupport.same(follow.initiatorBytes, stream.toServer), "stream \(stream.stream) initiator bytes")
            #expect(TestSupport.same(follow.responderBytes, stream.toClient), "stream \(stream.stream) responder bytes")
        }
    }

    /// The proxy's FINs on the server leg (port 50000 on loopback): each one's relative sequence number.
    static func proxyFinsToServer(_ path: String) throws -> [Int] {
        let fields = try TestSupport.run(
            "/usr/bin/tshark",
            ["-n", "-r", path, "-Y", "tcp.flags.fin == 1 && tcp.srcport == 50000", "-T", "fields", "-e", "tcp.seq"]
        )
        return fields.stdout.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }

    @Test(
        "bytes the relay wrote after passing a FIN on (it held them: a partition, a slow reader) are in the capture, and the proxy's FIN follows the last of them"
    )
    func finBehindHeldBytes() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let upload = TestSupport.bytes(count: 5_000, seed: 7)
        let reply = Array("bye\n".utf8)
        let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000)
        let ms: Int64 = 1_000_000
        writer.record(contentsOf: [
            TrafficEvent(time: 0, connection: 1, kind: .opened(CaptureReaderTests.loopbackEndpoints)),
            TrafficEvent(time: 1 * ms, connection: 1, kind: .read(.client, upload)),
            TrafficEvent(time: 2 * ms, connection: 1, kind: .written(.server, Array(upload[..<1_000]))),
            TrafficEvent(time: 3 * ms, connection: 1, kind: .closed(.client, .fin)),
            TrafficEvent(time: 900 * ms, connection: 1, kind: .written(.server, Array(upload[1_000...]))),
            TrafficEvent(time: 901 * ms, connection: 1, kind: .acknowledged(.server, upTo: 5_000)),
            TrafficEvent(time: 902 * ms, connection: 1, kind: .read(.server, reply)),
            TrafficEvent(time: 903 * ms, connection: 1, kind: .written(.client, reply)),
            TrafficEvent(time: 904 * ms, connection: 1, kind: .closed(.server, .fin)),
        ])
        try writer.close()
        let path = directory + "/capture.pcap"

        var events: [TrafficEvent] = []
        _ = try CaptureReader.read(paths: writer.paths) { events.append($0) }
        let traffic = try #require(ConnectionTraffic.collect(events)[1])
        #expect(TestSupport.same(traffic.writtenToServer, upload), "every byte written to the server, the 4,000 after the FIN too")
        #expect(TestSupport.same(traffic.writtenToClient, reply))
        let follow = try Tshark.follow(path: path, stream: 1)
        #expect(TestSupport.same(follow.initiatorBytes, upload))
        // Relative sequence numbers: the proxy's first data byte is 1, so its FIN after 5,000 bytes is 5,001.
        #expect(try Self.proxyFinsToServer(path) == [5_001])
    }

    @Test("a FIN that waits for bytes never written (a fault dropped them) goes at the leg's next close, or when the capture ends")
    func waitingFinGoesAtTheEnd() throws {
        let upload = TestSupport.bytes(count: 3_000, seed: 8)
        for endsWithReset in [false, true] {
            let directory = try TestSupport.makeTemporaryDirectory()
            defer { TestSupport.removeDirectory(directory) }
            let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000)
            var events: [TrafficEvent] = [
                TrafficEvent(time: 0, connection: 1, kind: .opened(CaptureReaderTests.loopbackEndpoints)),
                TrafficEvent(time: 1_000, connection: 1, kind: .read(.client, upload)),
                TrafficEvent(time: 2_000, connection: 1, kind: .written(.server, Array(upload[..<1_200]))),
                TrafficEvent(time: 3_000, connection: 1, kind: .closed(.client, .fin)),
            ]
            if endsWithReset { events.append(TrafficEvent(time: 4_000, connection: 1, kind: .closed(.server, .reset))) }
            writer.record(contentsOf: events)
            try writer.close()
            let path = directory + "/capture.pcap"
            #expect(try Self.proxyFinsToServer(path) == [1_201], "reset: \(endsWithReset)")
            var read: [TrafficEvent] = []
            _ = try CaptureReader.read(paths: writer.paths) { read.append($0) }
            let traffic = try #require(ConnectionTraffic.collect(read)[1])
            #expect(TestSupport.same(traffic.writtenToServer, Array(upload[..<1_200])))
        }
    }

    @Test("a capture of TLS proxies is pcapng marked as decrypted (section and first-packet comments); tshark and the reader read it")
    func decryptedCaptureIsMarked() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let run = Self.scriptedRun()
        let writer = try CaptureWriter(directory: directory, startedAt: 1_700_000_000, decryptedProxies: ["stream"])
        writer.record(contentsOf: run.events)
        try writer.close()
        let path = directory + "/capture.pcap"
        let magic = [UInt8](try #require(FileManager.default.contents(atPath: path)).prefix(4))
        #expect(magic == [0x0a, 0x0d, 0x0d, 0x0a], "pcapng")
        let info = try TestSupport.run("/usr/bin/capinfos", [path])
        #expect(info.stdout.contains("pcapng") && info.stdout.contains("DECRYPTED: connections of the TLS proxies stream"), "\(info.stdout)")
        let comments = try TestSupport.run("/usr/bin/tshark", ["-n", "-r", path, "-Y", "frame.comment", "-T", "fields", "-e", "frame.comment"])
        let lines = comments.stdout.split(separator: "\n").filter { !$0.isEmpty }
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains("decrypted by chaos: proxy stream terminates TLS") }, "\(comments.stdout)")
        let listing = try TestSupport.run("/usr/bin/tshark", ["-n", "-r", path, "-o", "tcp.check_checksum:TRUE"])
        #expect(listing.status == 0 && !listing.stdout.lowercased().contains("malformed"))
        let follow = try Tshark.follow(path: path, stream: 0)
        #expect(TestSupport.same(follow.initiatorBytes, run.upstream[0]))
        let (_, statistics) = try CaptureReader.readAll(path: path)
        #expect(statistics.packets == writer.statistics.packets)
        // Without TLS proxies the capture stays classic pcap.
        let plain = try CaptureWriter(directory: directory + "/plain", startedAt: 1_700_000_000)
        plain.record(contentsOf: run.events)
        try plain.close()
        let plainMagic = [UInt8](try #require(FileManager.default.contents(atPath: directory + "/plain/capture.pcap")).prefix(4))
        #expect(plainMagic == [0xd4, 0xc3, 0xb2, 0xa1] || plainMagic == [0x4d, 0x3c, 0xb2, 0xa1], "classic pcap: \(plainMagic)")
    }

    @Test(
        "a ring keeps its files within the bound, deletes the oldest, and a frozen ring keeps the anomaly (pcap and pcapng)",
        arguments: [false, true]
    )
    func ringRotation(decrypted: Bool) throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        let ring = 1 << 20
        let writer = try CaptureWriter(
            directory: directory,
            ringBytes: ring,
            startedAt: 1_700_000_000,
            decryptedProxies: decrypted ? ["p"] : []
        )
        let endpoints = ConnectionEndpoints(
            proxy: "p",
            client: "127.0.0.1:1",
            listen: "127.0.0.1:2",
            proxyLocal: "127.0.0.1:3",
            server: "127.0.0.1:4"
        )
        writer.record(TrafficEvent(time: 0, connection: 1, kind: .opened(endpoints)))
        let chunk = TestSupport.bytes(count: 10_000, seed: 9)
        for index in 0..<400 {
            writer.record(TrafficEvent(time: Int64(index) * 1_000, connection: 1, kind: .read(.client, chunk)))
            let total = try Self.directorySize(directory)
            #expect(total <= ring)
        }
        let beforeFreeze = writer.paths
        #expect(beforeFreeze.count > 2)
        #expect(!beforeFreeze.contains(directory + "/capture-000.pcap"))
        #expect(!FileManager.default.fileExists(atPath: directory + "/capture-000.pcap"))

        writer.freeze()
        #expect(try Self.directorySize(directory) <= ring / 2 + ring / 8)
        let survivors = writer.paths
        for index in 400..<800 {
            writer.record(TrafficEvent(time: Int64(index) * 1_000, connection: 1, kind: .read(.client, chunk)))
        }
        try writer.close()
        let after = writer.paths
        #expect(Array(after.prefix(survivors.count)) == survivors, "frozen ring deletes nothing")
        #expect(try Self.directorySize(directory) <= ring)
        #expect(writer.statistics.droppedPackets > 0)
        for file in after {
            let listing = try TestSupport.run("/usr/bin/tshark", ["-n", "-r", file])
            #expect(listing.status == 0, "tshark reads \(file)")
        }
    }

    @Test("a ring smaller than 1 MiB is bad input")
    func tinyRing() throws {
        let directory = try TestSupport.makeTemporaryDirectory()
        defer { TestSupport.removeDirectory(directory) }
        #expect(throws: ChaosError.self) {
            _ = try CaptureWriter(directory: directory, ringBytes: 1000, startedAt: 0)
        }
    }

    static func directorySize(_ directory: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: directory).reduce(0) { total, name in
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + name)
            return total + ((attributes[.size] as? Int) ?? 0)
        }
    }
}
