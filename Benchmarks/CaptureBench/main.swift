// CaptureBench: how fast `CaptureReader` turns a capture into TrafficEvents, as a ratio to a plain
// libpcap `pcap_next_ex` loop over the same file (and how fast `CaptureWriter` writes it).
//
// usage: CaptureBench [MEGABYTES=500] [--tshark] [--small]
// --small writes 100–1460-byte chunks (an Ethernet-MTU capture: many more packets per megabyte).
// Build and run in release: swift run -c release CaptureBench
import CPcap
import ChaosCapture
import ChaosCore
import Foundation

let arguments = CommandLine.arguments.dropFirst()
let megabytes = arguments.compactMap { Int($0) }.first ?? 500
let runTshark = arguments.contains("--tshark")
let chunkSizes = arguments.contains("--small") ? 100...1_460 : 1_024...65_536
let targetBytes = megabytes << 20
let directory = NSTemporaryDirectory() + "chaos-capture-bench-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
let path = directory + "/capture.pcap"

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

// 1. Write ~MEGABYTES of capture: 16 proxied connections, chunks of 1–64 KiB (or small ones), each read from the
//    client and written to the server (so both legs are in the file).
var generator = SeededGenerator(seed: 42)
let pool = (0..<(1 << 17)).map { _ in UInt8.random(in: 0...255, using: &generator) }
let writer = try CaptureWriter(path: path, startedAt: Date().timeIntervalSince1970)
for id in 1...16 {
    writer.record(
        TrafficEvent(
            time: 0,
            connection: ConnectionID(id),
            kind: .opened(
                ConnectionEndpoints(
                    proxy: "bench",
                    client: "127.0.0.1:\(40_000 + id)",
                    listen: "127.0.0.1:7000",
                    proxyLocal: "127.0.0.1:\(50_000 + id)",
                    server: "127.0.0.1:7001"
                )
            )
        )
    )
}
var time: Int64 = 1_000
var payloadBytes = 0
let writeStart = now()
while payloadBytes * 2 < targetBytes {
    let size = Int.random(in: chunkSizes, using: &generator)
    let offset = Int.random(in: 0..<(pool.count - size), using: &generator)
    let chunk = Array(pool[offset..<(offset + size)])
    let id = ConnectionID(Int.random(in: 1...16, using: &generator))
    let side: Side = Bool.random(using: &generator) ? .client : .server
    writer.record(TrafficEvent(time: time, connection: id, kind: .read(side, chunk)))
    writer.record(TrafficEvent(time: time + 5_000, connection: id, kind: .written(side.other, chunk)))
    time += 10_000
    payloadBytes += size
}
try writer.close()
let writeSeconds = now() - writeStart
let size = fileSize(path)
let sizeMB = Double(size) / 1_048_576
print(
    String(
        format: "capture: %.1f MB, %d packets, written in %.2f s (%.0f MB/s)",
        sizeMB,
        writer.statistics.packets,
        writeSeconds,
        sizeMB / writeSeconds
    )
)

// 2. The baseline: a plain libpcap loop that only touches each packet.
func plainLoop() -> (seconds: Double, bytes: Int) {
    var errorBuffer = [CChar](repeating: 0, count: Int(PCAP_ERRBUF_SIZE) + 1)
    guard let handle = pcap_open_offline(path, &errorBuffer) else { fatalError("cannot open \(path)") }
    defer { pcap_close(handle) }
    var header: UnsafeMutablePointer<pcap_pkthdr>?
    var data: UnsafePointer<UInt8>?
    var bytes = 0
    var checksum: UInt8 = 0
    let start = now()
    while pcap_next_ex(handle, &header, &data) == 1 {
        if let header, let data {
            bytes += Int(header.pointee.caplen)
            checksum ^= data[Int(header.pointee.caplen) - 1]
        }
    }
    let seconds = now() - start
    if checksum == 0xff && bytes == 0 { print("") }  // keep the loop's reads alive
    return (seconds, bytes)
}

// 3. CaptureReader: decode, reassemble, pair legs, emit events.
func readerLoop() throws -> (seconds: Double, bytes: Int, statistics: CaptureStatistics) {
    var delivered = 0
    let start = now()
    let statistics = try CaptureReader.read(path: path) { event in
        if case .written(_, let bytes) = event.kind { delivered += bytes.count }
    }
    return (now() - start, delivered, statistics)
}

var best = (plain: Double.infinity, reader: Double.infinity)
var lastStatistics = CaptureStatistics()
for _ in 0..<3 {
    let plain = plainLoop()
    let reader = try readerLoop()
    precondition(reader.bytes == payloadBytes, "reader delivered \(reader.bytes) of \(payloadBytes) bytes")
    best.plain = min(best.plain, plain.seconds)
    best.reader = min(best.reader, reader.seconds)
    lastStatistics = reader.statistics
}
print(String(format: "plain libpcap loop: %.3f s  %.0f MB/s", best.plain, sizeMB / best.plain))
print(
    String(
        format: "CaptureReader:      %.3f s  %.0f MB/s  (%d connections, %d paired, loss %d bytes)",
        best.reader,
        sizeMB / best.reader,
        lastStatistics.connections,
        lastStatistics.pairedConnections,
        lastStatistics.captureLossBytes
    )
)
print(
    String(
        format: "ratio CaptureReader / plain libpcap loop: %.2f× the time (%.0f%% of its speed)",
        best.reader / best.plain,
        100 * best.plain / best.reader
    )
)

if runTshark {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/tshark")
    process.arguments = ["-n", "-r", path, "-q"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    let start = now()
    try process.run()
    process.waitUntilExit()
    let seconds = now() - start
    print(
        String(
            format: "tshark -r FILE -q:  %.3f s  %.0f MB/s  (CaptureReader is %.1f× faster)",
            seconds,
            sizeMB / seconds,
            seconds / best.reader
        )
    )
}
