import ChaosCapture
import ChaosCore
import Foundation
import Testing

@testable import ChaosTLSDecryption

/// A real QUIC conversation between aioquic's client and server (Tests/Fixtures/captures/make_quic_captures.py: two
/// streams of newline JSON each way, captured with tcpdump -i lo, checked there against tshark's decryption with the
/// client's key log and the two ends' own logs): chaos opens every packet tshark opened, finds as many STREAM frames
/// carrying as many bytes each way, and the streams it reassembles hold exactly the seqs each end logged reading; the
/// same messages over HTTP/3 (`make_quic_captures.py --http3`) open as tshark opens them too.
@Suite("A QUIC capture of aioquic opens as tshark opens it")
struct QUICCaptureFixtureTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/captures/quic")

    static func facts(_ fixture: String = "aioquic-lines") throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("\(fixture).json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// What one direction carried, as the decoder opened it.
    struct Direction {
        var datagrams = 0
        var packets = 0
        var streamFrames = 0
        var streamBytes = 0
        var pieces: [UInt64: [(offset: UInt64, data: [UInt8])]] = [:]
        var unopened: [QUICConnectionDecoder.Unopened] = []

        /// Each stream's bytes from offset 0, the pieces put in order (a retransmitted piece overlaps); nil past a gap.
        func streams() -> [UInt64: [UInt8]?] {
            pieces.mapValues { pieces in
                var bytes: [UInt8] = []
                for piece in pieces.sorted(by: { $0.offset < $1.offset }) {
                    guard piece.offset <= UInt64(bytes.count) else { return nil }
                    let end = piece.offset + UInt64(piece.data.count)
                    if end > UInt64(bytes.count) { bytes += piece.data.dropFirst(bytes.count - Int(piece.offset)) }
                }
                return bytes
            }
        }
    }

    static func decode(
        keyLog: KeyLog,
        port: Int,
        fixture: String = "aioquic-lines"
    ) throws -> (directions: [QUICSender: Direction], decoder: QUICConnectionDecoder) {
        var decoder = QUICConnectionDecoder(keyLog: keyLog)
        var directions: [QUICSender: Direction] = [.client: Direction(), .server: Direction()]
        let path = folder.appendingPathComponent("\(fixture).pcap").path
        try CaptureDatagrams.read(path: path) { datagram in
            let sender: QUICSender = Int(datagram.destinationPort) == port ? .client : .server
            let result = decoder.decode(datagram: datagram.payload[...], from: sender)
            directions[sender]!.datagrams += 1
            directions[sender]!.packets += result.packets.count
            directions[sender]!.unopened += result.unopened
            for packet in result.packets {
                for case .stream(let id, let offset, let data, _) in packet.frames {
                    directions[sender]!.streamFrames += 1
                    directions[sender]!.streamBytes += data.count
                    directions[sender]!.pieces[id, default: []].append((offset, data))
                }
            }
        }
        return (directions, decoder)
    }

    /// The seqs of each stream name in newline JSON.
    static func seqs(_ streams: [UInt64: [UInt8]?]) -> [String: [Int]] {
        var result: [String: [Int]] = [:]
        for bytes in streams.values {
            for line in (bytes ?? []).split(separator: 0x0A) {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
                    let name = object["stream"] as? String, let seq = object["seq"] as? Int
                else { continue }
                result[name, default: []].append(seq)
            }
        }
        return result.mapValues { $0.sorted() }
    }

    @Test(
        "every packet opens with the client's key log; STREAM frames, their bytes and the seqs equal tshark's and the logs'",
        arguments: ["aioquic-lines", "aioquic-http3"]
    )
    func opensAsTsharkDoes(fixture: String) throws {
        let facts = try Self.facts(fixture)
        let port = try #require(facts["server_port"] as? Int)
        var keys = KeyLog()
        try keys.read(path: Self.folder.appendingPathComponent("\(fixture).keys").path)
        let (directions, decoder) = try Self.decode(keyLog: keys, port: port, fixture: fixture)
        #expect(decoder.version == .v1)
        #expect(decoder.suiteName == CipherSuite.describe(UInt16(try #require(facts["cipher_suite"] as? Int))))
        for (sender, key) in [(QUICSender.client, "upstream"), (.server, "downstream")] {
            let expected = try #require(facts[key] as? [String: Any])
            let seen = try #require(directions[sender])
            #expect(seen.unopened.isEmpty, "\(key): \(seen.unopened)")
            #expect(seen.datagrams == expected["datagrams"] as? Int, "\(key) datagrams")
            #expect(seen.packets == expected["decrypted_packets"] as? Int, "\(key) packets opened, as tshark")
            #expect(seen.streamFrames == expected["stream_frames"] as? Int, "\(key) STREAM frames, as tshark")
            #expect(seen.streamBytes == expected["stream_bytes"] as? Int, "\(key) STREAM bytes, as tshark")
            let logged = try #require(expected["seqs_read"] as? [String: [Int]])
            // Over HTTP/3 the lines sit in DATA frames: QUICCaptureAuditTests reads them through framing http3.
            if fixture == "aioquic-lines" { #expect(Self.seqs(seen.streams()) == logged, "\(key): the seqs the receiving end logged reading") }
            #expect(seen.streams().values.allSatisfy { $0 != nil }, "\(key): no stream has a gap")
        }
    }

    @Test("with no secrets for its ClientHello, the Initials open and every Handshake and 1-RTT packet waits for keys that never come")
    func withoutTheKeyLog() throws {
        let port = try #require(try Self.facts()["server_port"] as? Int)
        let (directions, decoder) = try Self.decode(keyLog: KeyLog(), port: port)
        #expect(decoder.clientRandom?.count == 32 && decoder.suiteName != nil, "the Initials opened")
        #expect(decoder.awaitingKeys > 0)
        for direction in directions.values {
            #expect(direction.streamFrames == 0)
            #expect(direction.unopened.allSatisfy { if case .noKeys = $0 { true } else { false } }, "\(direction.unopened.prefix(3))")
        }
    }

    /// The stream events of the fixture's connection, opened with its key log; streams numbered from 101.
    static func streamEvents(cacheBudget: Int = QUICStreamEvents.defaultCacheBudget) throws -> QUICStreamEvents {
        var keys = KeyLog()
        try keys.read(path: folder.appendingPathComponent("aioquic-lines.keys").path)
        var nextID: ConnectionID = 100
        return QUICStreamEvents(
            secrets: { keys.secrets(for: $0) },
            newID: {
                nextID += 1
                return nextID
            },
            cacheBudget: cacheBudget
        )
    }

    @Test(
        "as a flow's datagram events, each QUIC stream becomes a connection: its bytes read and written in order, acknowledged to the end, finished both ways"
    )
    func streamEvents() throws {
        let port = try #require(try Self.facts()["server_port"] as? Int)
        let adapter = try Self.streamEvents()
        let endpoints = ConnectionEndpoints(
            proxy: "capture",
            client: "127.0.0.1:1",
            listen: "127.0.0.1:\(port)",
            proxyLocal: "127.0.0.1:1",
            server: "127.0.0.1:\(port)"
        )
        var out = adapter.transform(TrafficEvent(time: 0, connection: 7, kind: .opened(endpoints)))
        try CaptureDatagrams.read(path: Self.folder.appendingPathComponent("aioquic-lines.pcap").path) { datagram in
            let from: Side = Int(datagram.destinationPort) == port ? .client : .server
            out += adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .read(from, datagram.payload)))
            out += adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .written(from.other, datagram.payload)))
        }
        #expect(adapter.packetsUnopened == 0 && adapter.packetsOpened > 0, "\(adapter.firstProblems)")
        let opened = Set(out.compactMap { if case .opened = $0.kind { $0.connection } else { nil } })
        #expect(opened == [101, 102], "two streams, two connections")
        for id in opened {
            let events = out.filter { $0.connection == id }
            for side in Side.allCases {
                let read = events.reduce(into: [UInt8]()) { if case .read(side, let bytes) = $1.kind { $0 += bytes } }
                let written = events.reduce(into: [UInt8]()) { if case .written(side.other, let bytes) = $1.kind { $0 += bytes } }
                let acknowledged = events.compactMap { if case .acknowledged(side.other, let upTo) = $0.kind { upTo } else { nil } }
                #expect(read.filter { $0 == 0x0A }.count == 30, "stream \(id) from \(side): 30 lines")
                #expect(written == read, "stream \(id): what was written to \(side.other) is what \(side) sent")
                #expect(acknowledged == acknowledged.sorted() && acknowledged.last == Int64(written.count), "acknowledged to the end")
                #expect(events.contains { $0.kind == .closed(side, .fin) }, "\(side) finished stream \(id)")
            }
        }
    }

    @Test(
        "the proxy moves the flow mid-transfer: where the server is heard no more (its ACKs went to the old socket), each stream's bytes written before the move and never acknowledged are cut at the end; where it goes on, nothing is",
        arguments: [false, true]
    )
    func acknowledgementsCutOnAMove(serverGoesOn: Bool) throws {
        let port = try #require(try Self.facts()["server_port"] as? Int)
        let adapter = try Self.streamEvents()
        let endpoints = ConnectionEndpoints(proxy: "p", client: "c", listen: "l", proxyLocal: "c", server: "s")
        var out = adapter.transform(TrafficEvent(time: 0, connection: 7, kind: .opened(endpoints)))
        var written: [ConnectionID: Int64] = [:]
        var atMove: [ConnectionID: Int64]?
        var last: Int64 = 0
        try CaptureDatagrams.read(path: Self.folder.appendingPathComponent("aioquic-lines.pcap").path) { datagram in
            let from: Side = Int(datagram.destinationPort) == port ? .client : .server
            last = datagram.time
            if atMove != nil, !serverGoesOn, from == .server { return }
            var events = adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .read(from, datagram.payload)))
            events += adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .written(from.other, datagram.payload)))
            for event in events { if case .written(.server, let bytes) = event.kind { written[event.connection, default: 0] += Int64(bytes.count) } }
            out += events
            // Just after a datagram of the client's stream bytes was written on: its ACK cannot have come yet.
            if atMove == nil, from == .client, events.contains(where: { if case .written = $0.kind { true } else { false } }),
                written.values.reduce(0, +) >= 1000
            {
                atMove = written
                out += adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .path(.rebound)))
            }
        }
        out += adapter.transform(TrafficEvent(time: last + 1, connection: 7, kind: .closed(.client, .fin)))
        out += adapter.transform(TrafficEvent(time: last + 1, connection: 7, kind: .closed(.server, .fin)))
        let moved = try #require(atMove, "the move came mid-transfer")
        var cuts: [ConnectionID: Int64] = [:]
        for event in out { if case .path(.acknowledgementsCut(.server, let upTo)) = event.kind { cuts[event.connection] = upTo } }
        if serverGoesOn {
            #expect(cuts.isEmpty, "every byte was acknowledged: \(cuts)")
            return
        }
        #expect(!cuts.isEmpty, "the last datagram before the move was never acknowledged")
        for (id, upTo) in moved {
            let acknowledged: Int64 =
                out.filter { $0.connection == id }.compactMap { (event: TrafficEvent) -> Int64? in
                    if case .acknowledged(.server, let at) = event.kind { at } else { nil }
                }.max() ?? 0
            #expect(cuts[id] == (upTo > acknowledged ? upTo : nil), "stream \(id): written \(upTo) before the move, acknowledged \(acknowledged)")
        }
        // Cut before the streams' connections close, so the audit reads it while they are open.
        for (id, _) in cuts {
            let cutAt = out.firstIndex { $0.connection == id && $0.kind == .path(.acknowledgementsCut(.server, upTo: cuts[id]!)) }
            let closedAt = out.firstIndex { $0.connection == id && $0.kind == .closed(.server, .fin) }
            #expect(cutAt != nil && closedAt.map { cutAt! < $0 } ?? true, "stream \(id)")
        }
    }

    @Test(
        "datagrams read and never written (a fault dropped them) are kept within the budget, oldest dropped first; a late write of one dropped adds nothing"
    )
    func keptWithinBudget() throws {
        let port = try #require(try Self.facts()["server_port"] as? Int)
        let adapter = try Self.streamEvents(cacheBudget: 4096)
        let endpoints = ConnectionEndpoints(proxy: "p", client: "c", listen: "l", proxyLocal: "c", server: "s")
        _ = adapter.transform(TrafficEvent(time: 0, connection: 7, kind: .opened(endpoints)))
        var fromClient: [[UInt8]] = []
        var peak = 0
        try CaptureDatagrams.read(path: Self.folder.appendingPathComponent("aioquic-lines.pcap").path) { datagram in
            let from: Side = Int(datagram.destinationPort) == port ? .client : .server
            if from == .client { fromClient.append(datagram.payload) }
            // Only the server's datagrams are written on: the client's wait, as a fault's drops would leave them.
            _ = adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .read(from, datagram.payload)))
            if from == .server { _ = adapter.transform(TrafficEvent(time: datagram.time, connection: 7, kind: .written(.client, datagram.payload))) }
            peak = max(peak, adapter.keptBytes)
        }
        #expect(peak <= 4096 && peak > 0, "kept \(peak) bytes at most")
        // One of the client's stream datagrams mid-transfer, dropped from the cache long ago: written now, it adds nothing.
        let late = adapter.transform(TrafficEvent(time: 1, connection: 7, kind: .written(.server, fromClient[fromClient.count / 2])))
        #expect(late.isEmpty)
    }
}
