import ChaosCapture
import ChaosCore
import ChaosTLSDecryption
import Crypto
import Foundation
import Testing

/// Real TLS conversations (Python's ssl and openssl s_client, captured with tcpdump -i lo, made by
/// Tests/Fixtures/captures/make_tls_captures.py and checked there against tshark's decryption): chaos decrypts each
/// with its client's key log to exactly the plaintext the fixture's JSON describes.
@Suite("TLS capture fixtures decrypt to their plaintext")
struct TLSCaptureFixtureTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/captures/tls")
    static let names = [
        "tls13-aes128gcm", "tls13-aes256gcm", "tls13-chacha20", "tls13-keyupdate",
        "tls12-aes128gcm", "tls12-aes256gcm", "tls12-chacha20",
    ]

    static func keyLog(_ name: String) throws -> KeyLog {
        var log = KeyLog()
        try log.read(path: folder.appendingPathComponent("\(name).keys").path)
        return log
    }

    static func read(_ name: String, keys: KeyLog) throws -> (events: [TrafficEvent], statistics: CaptureStatistics) {
        var options = CaptureReadOptions()
        options.keyLog = keys
        return try CaptureReader.readAll(path: folder.appendingPathComponent("\(name).pcap").path, options: options)
    }

    static func facts(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: folder.appendingPathComponent("\(name).json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test(
        "each fixture decrypts to the plaintext its JSON names (SHA-256, line count), under its version and suite",
        arguments: names
    )
    func decrypts(name: String) throws {
        let (events, statistics) = try Self.read(name, keys: try Self.keyLog(name))
        let facts = try Self.facts(name)
        var upstream: [UInt8] = []
        var downstream: [UInt8] = []
        var negotiated: [TrafficEvent.TLSNote] = []
        for event in events {
            switch event.kind {
            case .read(.client, let bytes): upstream += bytes
            case .read(.server, let bytes): downstream += bytes
            case .tls(let note): negotiated.append(note)
            default: break
            }
        }
        #expect(statistics.tlsConversations == 1 && statistics.tlsDecrypted == 1)
        for (bytes, key) in [(upstream, "upstream"), (downstream, "downstream")] {
            let expected = try #require(facts[key] as? [String: Any])
            #expect(Self.hex(SHA256.hash(data: bytes)) == expected["sha256"] as? String, "\(name) \(key)")
            #expect(bytes.filter { $0 == 0x0A }.count == expected["lines"] as? Int, "\(name) \(key)")
        }
        let version = (facts["tls_version"] as? String) == "TLSv1.3" ? "TLS 1.3" : "TLS 1.2"
        guard case .negotiated(_, let saidVersion, let suite)? = negotiated.first else {
            Issue.record("\(name): no negotiated note first: \(negotiated)")
            return
        }
        #expect(saidVersion == version && suite == facts["cipher_suite"] as? String)
        #expect(negotiated.count == 1, "\(name): \(negotiated)")
        #expect(statistics.tlsPlaintextBytes == Int64(upstream.count + downstream.count))
    }

    @Test(
        "acknowledgements fall on the plaintext ends of records, and the last covers every byte each way",
        arguments: ["tls13-aes256gcm", "tls12-chacha20", "tls13-keyupdate"]
    )
    func acknowledgementsAtRecordEnds(name: String) throws {
        let (events, _) = try Self.read(name, keys: try Self.keyLog(name))
        var ends: [Side: Set<Int64>] = [.client: [0], .server: [0]]
        var written: [Side: Int64] = [.client: 0, .server: 0]
        var acknowledged: [Side: [Int64]] = [.client: [], .server: []]
        for event in events {
            switch event.kind {
            case .written(let side, let bytes):
                written[side]! += Int64(bytes.count)  // one event per record
                ends[side]!.insert(written[side]!)
            case .acknowledged(let side, let upTo): acknowledged[side]!.append(upTo)
            default: break
            }
        }
        for side in [Side.client, .server] {
            let acks = acknowledged[side]!
            #expect(!acks.isEmpty && acks == acks.sorted(), "\(name) \(side)")
            #expect(acks.allSatisfy { ends[side]!.contains($0) }, "\(name) \(side): an ack inside a record")
            #expect(acks.last == written[side], "\(name) \(side): \(acks.last ?? -1) of \(written[side]!)")
        }
    }

    @Test("the KeyUpdate fixture really updates its keys, and decrypts across them")
    func keyUpdate() throws {
        let facts = try Self.facts("tls13-keyupdate")
        let updates =
            ((facts["upstream"] as? [String: Any])?["key_updates"] as? Int ?? 0)
            + ((facts["downstream"] as? [String: Any])?["key_updates"] as? Int ?? 0)
        #expect(updates >= 2)
        let (_, statistics) = try Self.read("tls13-keyupdate", keys: try Self.keyLog("tls13-keyupdate"))
        #expect(statistics.tlsDecrypted == 1 && statistics.tlsRecords > 100)
    }

    @Test("another conversation's key log: a protocol problem naming the client random, and no byte audited")
    func noKeys() throws {
        let (events, statistics) = try Self.read("tls13-chacha20", keys: try Self.keyLog("tls12-chacha20"))
        let random = try #require(try Self.facts("tls13-chacha20")["client_random"] as? String)
        let problems = events.compactMap { event -> String? in
            if case .tls(.problem(let reason)) = event.kind { return reason } else { return nil }
        }
        #expect(problems.count == 1 && problems[0].contains("no keys for client random \(random)"), "\(problems)")
        #expect(!events.contains { if case .read = $0.kind { true } else { false } })
        #expect(statistics.tlsConversations == 1 && statistics.tlsDecrypted == 0)
    }

    @Test(
        "a capture that ends after the server's first flight, with no keys: one abandoned handshake, nothing failed; with the client's next packet, one failure"
    )
    func abandonedHandshakeInACapture() throws {
        let packets = try PcapPackets(path: Self.folder.appendingPathComponent("tls13-aes128gcm.pcap").path)
        let serverFlight = try #require(packets.firstPayload(fromClient: false))
        let clientNext = try #require(packets.firstPayload(fromClient: true, after: serverFlight))
        for (last, abandoned) in [(serverFlight, true), (clientNext, false)] {
            let path = NSTemporaryDirectory() + "chaos-abandoned-\(UUID().uuidString).pcap"
            defer { try? FileManager.default.removeItem(atPath: path) }
            try packets.write(through: last, to: path)
            var options = CaptureReadOptions()
            options.keyLog = KeyLog()
            let (events, statistics) = try CaptureReader.readAll(path: path, options: options)
            let problems = events.filter { if case .tls(.problem) = $0.kind { true } else { false } }
            #expect(statistics.tlsConversations == 1 && statistics.tlsDecrypted == 0)
            #expect(statistics.tlsAbandoned == (abandoned ? 1 : 0) && statistics.tlsFailed == (abandoned ? 0 : 1), "\(statistics)")
            #expect(problems.count == (abandoned ? 0 : 1), "\(problems)")
        }
    }

    @Test("a wrong secret: decryption failed at a numbered record, each direction once", arguments: ["tls13-aes128gcm", "tls12-aes256gcm"])
    func wrongSecret(name: String) throws {
        let text = try String(contentsOf: Self.folder.appendingPathComponent("\(name).keys"), encoding: .utf8)
        // The last hex digit of every secret changed.
        let damaged = text.split(separator: "\n").map { line -> String in
            guard !line.hasPrefix("#"), let last = line.last else { return String(line) }
            return line.dropLast() + (last == "0" ? "1" : "0")
        }.joined(separator: "\n")
        var keys = KeyLog()
        try keys.add(text: Array(damaged.utf8), source: "damaged")
        let (events, _) = try Self.read(name, keys: keys)
        let problems = events.compactMap { event -> String? in
            if case .tls(.problem(let reason)) = event.kind { return reason } else { return nil }
        }
        #expect(!problems.isEmpty && problems.allSatisfy { $0.contains("decryption failed at record") }, "\(problems)")
        #expect(!events.contains { if case .read = $0.kind { true } else { false } })
    }
}

/// A classic pcap of Ethernet/IPv4/TCP packets (the fixtures'), cut after a chosen packet.
struct PcapPackets {
    let header: Data
    /// Each packet's record (its 16-byte header and data), whether the client sent it, and its TCP payload's length.
    let packets: [(record: Data, fromClient: Bool, payload: Int)]

    init(path: String) throws {
        let file = try Data(contentsOf: URL(fileURLWithPath: path))
        header = file.prefix(24)
        var packets: [(Data, Bool, Int)] = []
        var offset = 24
        var clientPort: UInt16?
        func u16(_ at: Int) -> Int { Int(file[at]) << 8 | Int(file[at + 1]) }
        while offset + 16 <= file.count {
            let length = Int(file[offset + 8]) | Int(file[offset + 9]) << 8 | Int(file[offset + 10]) << 16 | Int(file[offset + 11]) << 24
            let ip = offset + 16 + 14
            let ipHeader = Int(file[ip] & 0x0F) * 4
            let tcp = ip + ipHeader
            let source = UInt16(u16(tcp))
            if clientPort == nil { clientPort = source }  // the SYN's sender
            let payload = u16(ip + 2) - ipHeader - Int(file[tcp + 12] >> 4) * 4
            packets.append((file.subdata(in: offset..<(offset + 16 + length)), source == clientPort, payload))
            offset += 16 + length
        }
        self.packets = packets
    }

    /// The index of the first packet with payload from the client (or the server) after `after`.
    func firstPayload(fromClient: Bool, after: Int = -1) -> Int? {
        packets.indices.first { $0 > after && packets[$0].fromClient == fromClient && packets[$0].payload > 0 }
    }

    /// Writes the packets up to and including index `last`.
    func write(through last: Int, to path: String) throws {
        var out = header
        for packet in packets[...last] { out += packet.record }
        try out.write(to: URL(fileURLWithPath: path))
    }
}
