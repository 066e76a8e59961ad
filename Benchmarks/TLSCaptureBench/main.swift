// TLSCaptureBench: how fast `chaos audit --keylog` audits a TLS 1.3 capture, as a ratio to the same traffic in
// cleartext, both read and audited (lines framing) in the same run.
//
// usage: TLSCaptureBench [MEGABYTES=200]
// Writes two captures of 16 connections carrying the same NDJSON lines in chunks of 1–16 KiB (one TLS record each,
// AES-128-GCM): one in cleartext, one in TLS with its key log; reads each three times through CaptureReader and
// the audit and prints the best MB/s of plaintext and the ratio (the goal: TLS at least 0.5× cleartext).
// Build and run in release: swift run -c release TLSCaptureBench
import ChaosAudit
import ChaosCapture
import ChaosCore
import ChaosTLSDecryption
import Foundation

let megabytes = CommandLine.arguments.dropFirst().compactMap { Int($0) }.first ?? 200
let directory = NSTemporaryDirectory() + "chaos-tls-capture-bench-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

// 1. The plaintext: NDJSON lines of 16 streams, cut into chunks of 1–16 KiB at any byte.
var generator = SeededGenerator(seed: 7)
let connections = 16
var streams = (1...connections).map { _ in [UInt8]() }
var seqs = [Int](repeating: 0, count: connections)
var total = 0
while total < megabytes << 20 {
    let index = Int.random(in: 0..<connections, using: &generator)
    seqs[index] += 1
    let line = Array(
        "{\"type\":\"MSG\",\"stream\":\"s\(index)\",\"seq\":\(seqs[index]),\"payload\":\"\(String(repeating: "x", count: Int.random(in: 20...400, using: &generator)))\"}\n"
            .utf8
    )
    streams[index] += line
    total += line.count
}
let messages = seqs.reduce(0, +)

// 2. Both captures, written chunk by chunk with acknowledgements, the connections interleaved.
let clearPath = directory + "/clear.pcap"
let tlsPath = directory + "/tls.pcap"
let keysPath = directory + "/keys.log"
let clear = try CaptureWriter(path: clearPath, startedAt: 0)
let tls = try CaptureWriter(path: tlsPath, startedAt: 0)
var sealers = (0..<connections).map { TLS13Sealer(connection: $0, generator: &generator) }
try sealers.map(\.keyLogLines).joined().write(toFile: keysPath, atomically: true, encoding: .utf8)
var time: Int64 = 0
/// Bytes written so far per connection, toward the server and toward the client, in each capture.
var clearWritten = [[Int64]](repeating: [0, 0], count: connections)
var tlsWritten = clearWritten
/// Records `bytes` from one side, written to the other and acknowledged by it.
func send(_ writer: CaptureWriter, _ id: Int, _ bytes: [UInt8], toServer: Bool, written: inout [[Int64]], at time: Int64) {
    let side: Side = toServer ? .server : .client
    writer.record(TrafficEvent(time: time, connection: ConnectionID(id + 1), kind: .read(side.other, bytes)))
    writer.record(TrafficEvent(time: time, connection: ConnectionID(id + 1), kind: .written(side, bytes)))
    let slot = toServer ? 0 : 1
    written[id][slot] += Int64(bytes.count)
    writer.record(TrafficEvent(time: time + 1_000, connection: ConnectionID(id + 1), kind: .acknowledged(side, upTo: written[id][slot])))
}
for id in 0..<connections {
    for writer in [clear, tls] {
        writer.record(
            TrafficEvent(
                time: 0,
                connection: ConnectionID(id + 1),
                kind: .opened(
                    ConnectionEndpoints(
                        proxy: "bench",
                        client: "127.0.0.1:\(40_000 + id)",
                        listen: "127.0.0.1:8443",
                        proxyLocal: "127.0.0.1:\(50_000 + id)",
                        server: "127.0.0.1:9443"
                    )
                )
            )
        )
    }
    send(tls, id, sealers[id].clientHello, toServer: true, written: &tlsWritten, at: time)
    send(tls, id, sealers[id].serverFlight(), toServer: false, written: &tlsWritten, at: time)
    send(tls, id, sealers[id].clientFinished(), toServer: true, written: &tlsWritten, at: time)
}
var offsets = [Int](repeating: 0, count: connections)
while let id = (0..<connections).filter({ offsets[$0] < streams[$0].count }).randomElement(using: &generator) {
    let size = min(Int.random(in: 1_024...16_384, using: &generator), streams[id].count - offsets[id])
    let chunk = Array(streams[id][offsets[id]..<(offsets[id] + size)])
    offsets[id] += size
    time += 10_000
    send(clear, id, chunk, toServer: true, written: &clearWritten, at: time)
    send(tls, id, sealers[id].seal(chunk, towardServer: true), toServer: true, written: &tlsWritten, at: time)
}
try clear.close()
try tls.close()
func size(_ path: String) -> Double { Double(((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0) / 1_048_576 }
print(
    String(
        format: "plaintext %.1f MB (%d messages); cleartext capture %.1f MB, TLS capture %.1f MB",
        Double(total) / 1_048_576,
        messages,
        size(clearPath),
        size(tlsPath)
    )
)

// 3. Read and audit each, three times; the best time counts.
func audit(_ path: String, keys: KeyLog?) throws -> (seconds: Double, ok: Int64, statistics: CaptureStatistics) {
    var options = CaptureReadOptions()
    options.keyLog = keys
    let engine = try AuditEngine(spec: ProtocolSpec())
    let start = now()
    let statistics = try CaptureReader.read(path: path, options: options) { engine.ingest($0) }
    let result = engine.finish()
    return (now() - start, result.totals.ok, statistics)
}
var keys = KeyLog()
try keys.read(path: keysPath)
var best = (clear: Double.infinity, tls: Double.infinity)
for _ in 0..<3 {
    let plain = try audit(clearPath, keys: nil)
    let secret = try audit(tlsPath, keys: keys)
    precondition(
        plain.ok == Int64(messages) && secret.ok == Int64(messages),
        "ok \(plain.ok) cleartext, \(secret.ok) TLS, of \(messages) messages"
    )
    precondition(secret.statistics.tlsDecrypted == 2 * connections, "decrypted \(secret.statistics.tlsDecrypted) conversations")
    best = (min(best.clear, plain.seconds), min(best.tls, secret.seconds))
}
let megabytesOfPlaintext = Double(total) / 1_048_576
print(String(format: "cleartext capture audited: %.3f s  %.0f MB/s of plaintext", best.clear, megabytesOfPlaintext / best.clear))
print(
    String(
        format: "TLS capture audited:       %.3f s  %.0f MB/s of plaintext (decrypted with the key log)",
        best.tls,
        megabytesOfPlaintext / best.tls
    )
)
print(String(format: "ratio TLS / cleartext: %.2f× the speed (goal ≥ 0.5×)", best.clear / best.tls))
