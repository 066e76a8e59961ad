import ChaosAudit
import ChaosCapture
import ChaosCore
import ChaosProtocols
import ChaosTLS
import ChaosTLSDecryption
import Foundation

/// One public input of chaos that fuzzing throws bytes at. Each must end without a trap, a hang or unbounded
/// memory whatever the bytes; errors are fine (they are what bad input should get).
///
/// A scenario file (parsed, checked, its timeline built); each protocol plug-in's bytes through the audit (as
/// read, written, acknowledged, cut; the plug-in gives the spec and a handshake, see
/// ``ProtocolPlugin/fuzzSetup(_:)``); a pcap or pcapng file through the capture reader and the audit; a
/// control-API request body (`POST /faults`), parsed and checked as the API does before installing it.
struct FuzzTarget: Sendable {
    /// The target's name (`CHAOS_FUZZ_TARGET`, and its corpus folder `Fuzz/corpus/NAME/`).
    let rawValue: String
    /// Runs the target on one input.
    let run: @Sendable ([UInt8]) -> Void

    /// Every target: the scenario, then one per protocol plug-in that has a fuzz setup, then pcap and api.
    static let allCases: [FuzzTarget] =
        [FuzzTarget(rawValue: "scenario") { scenario($0) }]
        + ProtocolRegistry.plugins.filter { $0.fuzzSetup([]) != nil }.map { plugin in
            FuzzTarget(rawValue: plugin.name) { data in
                guard let setup = plugin.fuzzSetup(data) else { return }
                audit(setup.input, spec: setup.spec, prelude: setup.prelude)
            }
        }
        + [
            FuzzTarget(rawValue: "pcap") { pcap($0) }, FuzzTarget(rawValue: "api") { api($0) },
            FuzzTarget(rawValue: "tls") { tls($0) }, FuzzTarget(rawValue: "tls-capture") { tlsCapture($0) },
            FuzzTarget(rawValue: "events") { events($0) }, FuzzTarget(rawValue: "quic") { quic($0) },
        ]

    private init(rawValue: String, run: @escaping @Sendable ([UInt8]) -> Void) {
        self.rawValue = rawValue
        self.run = run
    }

    /// The target named `rawValue`.
    init?(rawValue: String) {
        guard let target = Self.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = target
    }

    private static func scenario(_ data: [UInt8]) {
        guard let scenario = try? Scenario.parse(yaml: String(decoding: data, as: UTF8.self), file: "fuzz.yaml") else { return }
        let timeline = Timeline(scenario: scenario, seed: scenario.seed ?? 1)
        _ = timeline.lines(first: 20)
        _ = timeline.count(upTo: 1000)
    }

    /// A TLS proxy's inputs: a client's first bytes (its ClientHello: SNI and ALPN), the leaf made for the name it
    /// asks (long, IDN, empty, anything), and a `tls:` block read from a scenario.
    private static func tls(_ data: [UInt8]) {
        if case .hello(let hello, _) = ClientHello.parse(data) {
            _ = try? leafIssuer?.leaf(for: hello.serverName ?? "")
            _ = hello.protocols.count
        }
        let block = String(decoding: data, as: UTF8.self)
        _ = try? Scenario.parse(
            yaml: "name: t\nduration: 1s\nproxies:\n  - name: p\n    listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    tls: "
                + block,
            file: "fuzz.yaml"
        )
    }

    /// A capture's TLS decryption: a key log (the bytes before the first 0), then the conversation's TCP bytes and
    /// acknowledgements as pieces of [control, length (2 bytes), bytes]: control bit 0 picks the direction (0:
    /// client → server), bit 1 makes the piece an acknowledgement of `length` × 16 bytes instead, bit 2 counts capture
    /// loss before it.
    private static func tlsCapture(_ data: [UInt8]) {
        let split = data.firstIndex(of: 0) ?? data.count
        var keys = KeyLog()
        try? keys.add(text: Array(data[..<split]), source: "fuzz")
        let conversation = TLSConversation(keyLog: keys, client: "c:1", server: "s:2")
        var loss = [0, 0]
        var index = split + 1
        while index + 3 <= data.count {
            let control = data[index]
            let length = Int(data[index + 1]) << 8 | Int(data[index + 2])
            index += 3
            let towardServer = control & 1 == 0
            if control & 4 != 0 { loss[towardServer ? 0 : 1] += 1 }
            if control & 2 != 0 {
                _ = conversation.acknowledge(towardServer: towardServer, tcpBytes: Int64(length) * 16)
            } else {
                let end = min(data.count, index + length)
                _ = conversation.receive(Array(data[index..<end]), towardServer: towardServer, captureLoss: loss[towardServer ? 0 : 1])
                index = end
            }
        }
    }

    /// QUIC's decoders: datagrams as pieces of [control, length (2 bytes), bytes], control bit 0 naming the sender
    /// (0: the client), through one connection's decoder (its headers, header protection, packet numbers, the
    /// connection IDs it learns) and each piece's bytes through the frame parser as a decrypted payload would be.
    private static func quic(_ data: [UInt8]) {
        var decoder = QUICConnectionDecoder(keyLog: KeyLog())
        var index = 0
        while index + 3 <= data.count {
            let sender: QUICSender = data[index] & 1 == 0 ? .client : .server
            let length = Int(data[index + 1]) << 8 | Int(data[index + 2])
            let end = min(data.count, index + 3 + length)
            let piece = Array(data[(index + 3)..<end])
            _ = decoder.decode(datagram: piece[...], from: sender)
            _ = try? QUICFrame.parse(piece)
            index = end
        }
    }

    /// One CA for the run of the fuzzer, in a folder of its own.
    private static let leafIssuer: LeafIssuer? = {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-fuzz-ca-\(getpid())").path
        return try? LeafIssuer(authority: CertificateAuthority.own(home: home))
    }()

    private static func api(_ data: [UInt8]) {
        // What the control API does with a POST /faults body (ControlAPI.addFault), without the sockets.
        let proxies = [ProxySpec(name: "p", listen: HostPort(host: "127.0.0.1", port: 7000), upstream: HostPort(host: "127.0.0.1", port: 7001))]
        let forever = Scenario.longestDuration
        guard
            let rule = try? FaultRule.parse(
                String(decoding: data, as: UTF8.self),
                proxies: proxies,
                duration: forever,
                source: "request body",
                instantAt: .zero,
                framings: ProtocolRegistry.catalog
            ),
            (try? rule.checkInvariants(source: "request body", proxies: ["p"])) != nil,
            (try? rule.checkBegins(within: forever, source: "request body")) != nil
        else { return }
        let timeline = Timeline(rules: [rule], seed: 1, duration: forever)
        _ = timeline.lines(first: 20)
        _ = timeline.count(upTo: 1000)
    }

    /// Cuts `data` into events: each piece's first byte picks what happens (read, written, acknowledged, a close, a
    /// new connection) and how many of the following bytes it carries.
    /// `prelude`: events every connection starts with (a handshake).
    private static func audit(_ data: [UInt8], spec: ProtocolSpec, prelude: [TrafficEvent.Kind] = []) {
        guard let engine = try? AuditEngine(spec: spec) else { return }
        let endpoints = ConnectionEndpoints(proxy: "f", client: "c", listen: "l", proxyLocal: "pl", server: "s")
        var connection: ConnectionID = 1
        var time: Int64 = 0
        var written: [Side: Int64] = [.client: 0, .server: 0]
        func open() {
            engine.ingest(TrafficEvent(time: time, connection: connection, kind: .opened(endpoints)))
            for kind in prelude {
                if case .written(let side, let bytes) = kind { written[side, default: 0] += Int64(bytes.count) }
                engine.ingest(TrafficEvent(time: time, connection: connection, kind: kind))
            }
        }
        open()
        // The last read of each producer: a write with the top bit set hands that very buffer over, as the relay does
        // when the consumer's socket takes a read whole (the audit's relayed pairs).
        var lastRead: [Side: [UInt8]] = [:]
        var index = 0
        while index < data.count {
            let control = data[index]
            let length = min(Int(control >> 3) * 4 + 1, data.count - index - 1)
            let bytes = Array(data[(index + 1)..<(index + 1 + max(length, 0))])
            index += 1 + max(length, 0)
            time += Int64(control) * 1_000
            let side: Side = control & 1 == 0 ? .client : .server
            let kind: TrafficEvent.Kind
            switch (control >> 1) & 3 {
            case 0:
                lastRead[side.other] = bytes
                kind = .read(side.other, bytes)
            case 1:
                let payload = control & 0x80 != 0 ? lastRead[side.other] ?? bytes : bytes
                written[side, default: 0] += Int64(payload.count)
                kind = .written(side, payload)
            case 2: kind = .acknowledged(side, upTo: written[side, default: 0] - Int64(bytes.first ?? 0) % 8)
            default:
                if control & 0x80 != 0 {
                    connection += 1
                    written = [.client: 0, .server: 0]
                    open()
                    continue
                } else {
                    kind = .closed(side, [.fin, .reset, .cutByFault, .resetByFault, .error][Int(bytes.first ?? 0) % 5])
                }
            }
            engine.ingest(TrafficEvent(time: time, connection: connection, kind: kind))
        }
        _ = engine.snapshot()
        _ = engine.finish()
    }

    /// The capture reader takes a path: the bytes go to one file per process, rewritten per input.
    private static let capturePath = FileManager.default.temporaryDirectory
        .appendingPathComponent("chaos-fuzz-\(getpid()).pcap").path

    private static func pcap(_ data: [UInt8]) {
        guard FileManager.default.createFile(atPath: capturePath, contents: Data(data)),
            let engine = try? AuditEngine(spec: ProtocolSpec())
        else { return }
        _ = try? CaptureReader.read(path: capturePath) { engine.ingest($0) }
        _ = engine.finish()
    }

    /// An agent's events.bin (`chaos report --merge` reads it): the bytes as the folder's only segment, read back and
    /// fed to a lines audit as a merge would (out-of-order times, unknown connections and all).
    private static func events(_ data: [UInt8]) {
        guard FileManager.default.createFile(atPath: eventsFolder + "/events.bin", contents: Data(data)),
            let reader = try? EventFileReader(folder: eventsFolder),
            let engine = try? AuditEngine(spec: ProtocolSpec(framing: .lines, seq: "seq", stream: "stream", ack: "ack"))
        else { return }
        var count = 0
        while count < 100_000, let event = try? reader.next() {
            engine.ingest(event)
            count += 1
        }
        _ = engine.finish()
    }

    /// The folder the events target writes its input to (one per process).
    static let eventsFolder: String = {
        let path = NSTemporaryDirectory() + "chaos-fuzz-events-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()
}
