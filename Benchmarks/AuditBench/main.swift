import ChaosAudit
import ChaosCore
import Foundation

// AuditBench: how fast and how lean the audit is on NDJSON.
//
//   swift run -c release AuditBench [MESSAGES] [THROUGHPUT_MESSAGES]
//   swift run -c release AuditBench websocket [MESSAGES]     (WebSocketBench.swift)
//   swift run -c release AuditBench grpc [MESSAGES]          (GRPCBench.swift)
//
// 1. Throughput: THROUGHPUT_MESSAGES (default 2,000,000) NDJSON messages, pre-built in 64 KiB reads, are fed as
//    a capture would (each read reported as read and as written: every message framed and classified twice).
//    Printed as messages per second and as a ratio to a plain newline scan of the same bytes.
// 2. Memory: MESSAGES (default 100,000,000) synthetic messages on 4 streams with a reconnect and a resumed gap
//    every million, generated on the fly; resident memory is printed every tenth of the way and must stay flat.

if CommandLine.arguments.dropFirst().first == "websocket" {
    try webSocketBench(messages: CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 1_000_000)
    exit(0)
}
if CommandLine.arguments.dropFirst().first == "grpc" {
    try grpcBench(messages: CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 1_000_000)
    exit(0)
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0.replacingOccurrences(of: "_", with: "")) }
let totalMessages = arguments.first ?? 100_000_000
let throughputMessages = arguments.dropFirst().first ?? 2_000_000

func residentMiB() -> Double {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let pages = statm.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? 0
    return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
}

func seconds(_ body: () -> Void) -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// NDJSON like the reference pair's, cut into reads of about 64 KiB (messages may straddle reads).
func reads(messages: Int, stream: String, firstSeq: Int) -> [[UInt8]] {
    var all: [UInt8] = []
    all.reserveCapacity(messages * 80)
    for seq in firstSeq..<(firstSeq + messages) {
        all.append(contentsOf: "{\"type\":\"MSG\",\"stream\":\"\(stream)\",\"seq\":\(seq),\"id\":\"m\(seq)\",\"payload\":\"hello world\"}\n".utf8)
    }
    return stride(from: 0, to: all.count, by: 65_519).map { Array(all[$0..<min(all.count, $0 + 65_519)]) }
}

let spec = ProtocolSpec(ignore: ["type": ["PING", "PONG", "HELLO", "WELCOME"]])
let endpoints = ConnectionEndpoints(proxy: "bench", client: "c", listen: "l", proxyLocal: "pl", server: "s")

// 1. Throughput.
let chunks = reads(messages: throughputMessages, stream: "c1", firstSeq: 1)
let bytes = chunks.reduce(0) { $0 + $1.count }
var newlines = 0
let scanTime = seconds {
    for chunk in chunks {
        chunk.withUnsafeBufferPointer { buffer in
            for byte in buffer where byte == 10 { newlines += 1 }
        }
    }
}
precondition(newlines == throughputMessages, "the scan miscounted")
let auditTime = Double(throughputMessages) / (try auditDownstream(spec, chunks, expecting: throughputMessages))
let rate = Double(throughputMessages) / auditTime
print("throughput: \(throughputMessages) NDJSON messages (\(bytes / 1_048_576) MiB), each framed and checked as sent and as delivered")
print(
    String(
        format: "  audit        %.3f s  %.2f M messages/s  (%.0f MiB/s of delivered bytes)",
        auditTime,
        rate / 1e6,
        Double(bytes) / auditTime / 1_048_576
    )
)
print(String(format: "  newline scan %.3f s  %.2f M messages/s", scanTime, Double(throughputMessages) / scanTime / 1e6))
print(
    String(
        format: "  ratio audit/scan: %.1fx slower; target >= 1 M messages/s: %@",
        auditTime / max(scanTime, 1e-9),
        rate >= 1_000_000 ? "met" : "NOT met"
    )
)

// 2. Memory on a long synthetic run.
let memoryEngine = try AuditEngine(spec: spec)
let streams = ["c1", "c2", "c3", "c4"]
let perBlock = 1000  // messages per stream per read
var prebuilt: [String: [UInt8]] = [:]
var template: [String: [(offset: Int, digits: Int)]] = [:]
// A fixed-width seq field lets one buffer per stream be rewritten in place for every block.
for stream in streams {
    var buffer: [UInt8] = []
    var slots: [(Int, Int)] = []
    for _ in 0..<perBlock {
        let head = Array("{\"type\":\"MSG\",\"stream\":\"\(stream)\",\"seq\":".utf8)
        buffer.append(contentsOf: head)
        slots.append((buffer.count, 12))
        buffer.append(contentsOf: Array(repeating: UInt8(ascii: "0"), count: 12))
        buffer.append(contentsOf: Array(",\"payload\":\"hello world\"}\n".utf8))
    }
    prebuilt[stream] = buffer
    template[stream] = slots
}
func fill(_ buffer: inout [UInt8], _ slots: [(offset: Int, digits: Int)], from seq: Int) {
    for (index, slot) in slots.enumerated() {
        var value = seq + index
        var position = slot.offset + slot.digits - 1
        while position >= slot.offset {
            buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
            position -= 1
        }
    }
}
print("memory: \(totalMessages) messages on \(streams.count) streams, a reconnect every 1,000,000 (resuming one seq late)")
var connection: ConnectionID = 1
var nextSeq = [Int](repeating: 1, count: streams.count)
var fed = 0
var time: Int64 = 0
var writtenOnConnection: Int64 = 0
var reportEvery = max(totalMessages / 10, perBlock * streams.count)
var nextReport = reportEvery
memoryEngine.ingest(TrafficEvent(time: 0, connection: connection, kind: .opened(endpoints)))
let baseline = residentMiB()
let memoryTime = seconds {
    while fed < totalMessages {
        for (index, stream) in streams.enumerated() {
            fill(&prebuilt[stream]!, template[stream]!, from: nextSeq[index])
            let chunk = prebuilt[stream]!
            memoryEngine.ingest(TrafficEvent(time: time, connection: connection, kind: .read(.server, chunk)))
            memoryEngine.ingest(TrafficEvent(time: time + 500_000, connection: connection, kind: .written(.client, chunk)))
            writtenOnConnection += Int64(chunk.count)
            memoryEngine.ingest(
                TrafficEvent(
                    time: time + 600_000,
                    connection: connection,
                    kind: .acknowledged(.client, upTo: writtenOnConnection)
                )
            )
            nextSeq[index] += perBlock
            fed += perBlock
            time += 1_000_000
        }
        if fed % 1_000_000 < perBlock * streams.count {
            memoryEngine.ingest(TrafficEvent(time: time, connection: connection, kind: .closed(.client, .cutByFault)))
            memoryEngine.ingest(TrafficEvent(time: time, connection: connection, kind: .closed(.server, .cutByFault)))
            connection += 1
            writtenOnConnection = 0
            memoryEngine.ingest(TrafficEvent(time: time + 1_000_000, connection: connection, kind: .opened(endpoints)))
            for index in nextSeq.indices { nextSeq[index] += 1 }  // resume one past: one lost seq per stream
        }
        if fed >= nextReport {
            let snapshot = memoryEngine.snapshot()
            print(
                String(
                    format: "  %11d messages  resident %7.1f MiB  lost so far %lld  gaps %lld",
                    fed,
                    residentMiB(),
                    snapshot.totals.lost,
                    snapshot.totals.gaps
                )
            )
            nextReport += reportEvery
        }
    }
}
let final = memoryEngine.finish()
print(
    String(
        format: "  done in %.1f s (%.2f M messages/s); resident %.1f MiB at start, %.1f MiB at end; ok %lld lost %lld",
        memoryTime,
        Double(fed) / memoryTime / 1e6,
        baseline,
        residentMiB(),
        final.totals.ok,
        final.totals.lost
    )
)
