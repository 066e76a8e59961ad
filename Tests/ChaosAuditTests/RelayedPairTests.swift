import ChaosAudit
import ChaosCore
import Testing

/// A read whose very buffer is written next at the same offset is audited in one pass (the relay writing a read whole,
/// a capture's standalone connection). The result must be exactly what the same traffic gives when every write is a
/// copy of its own (each audited on its own): random traffic of both directions with sequenced, ignored,
/// unsequenced, ack-only, undecodable and overlong lines, cut into random reads, each read written whole (shared
/// buffer), in pieces, or not yet, with acknowledgements, a reset mid-stream and closes with a line half read, compared
/// whole.
@Suite("Relayed pairs: a read written whole from its own buffer audits as when written as a copy")
struct RelayedPairTests {
    static let spec = ProtocolSpec(ack: "ack", ignore: ["type": ["PING"]], maxMessage: 400)

    /// The lines of one direction: mostly sequenced messages of two streams, and every other kind now and then.
    static func lines(_ generator: inout SeededGenerator, count: Int, prefix: String, overlong: Bool) -> [UInt8] {
        var bytes: [UInt8] = []
        var seqs = [1, 1]
        for index in 0..<count {
            let line: String
            switch overlong && index == count / 2 ? -1 : Int.random(in: 0..<40, using: &generator) {
            case 0: line = #"{"type":"PING"}"#
            case 1: line = #"{"type":"MSG","stream":"\#(prefix)0"}"#
            case 2: line = #"{"type":"ACK","ack":\#(Int.random(in: 1...50, using: &generator))}"#
            case 3: line = "not json at all"
            case -1: line = String(repeating: "y", count: 500)
            default:
                let stream = Int.random(in: 0...1, using: &generator)
                // Now and then a seq is repeated or skipped, so duplicates and gaps are judged too.
                let step = [0, 2].randomElement(using: &generator)! * (Int.random(in: 0..<20, using: &generator) == 0 ? 1 : 0)
                seqs[stream] += step == 0 ? 1 : step - 1
                line =
                    #"{"type":"MSG","stream":"\#(prefix)\#(stream)","seq":\#(seqs[stream]),"payload":"\#(String(repeating: "x", count: Int.random(in: 0...90, using: &generator)))"}"#
            }
            bytes += Array(line.utf8) + [10]
        }
        return bytes
    }

    /// Feeds one scripted run of `seed`, with writes sharing the read's buffer (`shared`) or always copies.
    static func run(seed: UInt64, shared: Bool) throws -> AuditResult {
        var generator = SeededGenerator(seed: seed)
        let engine = try AuditEngine(spec: spec)
        var time: Int64 = 0
        func add(_ kind: TrafficEvent.Kind) {
            time += 1_000
            engine.ingest(TrafficEvent(time: time, connection: 1, kind: kind))
        }
        add(.opened(ConnectionEndpoints(proxy: "p", client: "c", listen: "l", proxyLocal: "pl", server: "s")))
        let streams = [Direction.upstream, .downstream].map {
            lines(
                &generator,
                count: 300,
                prefix: $0 == .upstream ? "u" : "d",
                overlong: seed.isMultiple(of: 5)
            )
        }
        var readAt = [0, 0]
        var writtenAt = [0, 0]
        var unwritten: [[UInt8]] = [[], []]
        var steps = 0
        while (readAt[0] < streams[0].count || readAt[1] < streams[1].count) && steps < 10_000 {
            steps += 1
            let slot = Int.random(in: 0...1, using: &generator)
            let direction: Direction = slot == 0 ? .upstream : .downstream
            guard readAt[slot] < streams[slot].count else { continue }
            let size = min(Int.random(in: 1...700, using: &generator), streams[slot].count - readAt[slot])
            let read = Array(streams[slot][readAt[slot]..<(readAt[slot] + size)])
            readAt[slot] += size
            add(.read(direction.producer, read))
            // A quarter of the seeds write every read whole, as a relay keeping up does: lockstep from start to end.
            let how = seed % 4 == 1 ? 0 : Int.random(in: 0..<10, using: &generator)
            if how < 6, unwritten[slot].isEmpty {
                add(.written(direction.consumer, shared ? read : read.withUnsafeBufferPointer { Array($0) }))
                writtenAt[slot] += size
            } else {
                unwritten[slot] += read
                if how < 9 {
                    let piece = Int.random(in: 0...unwritten[slot].count, using: &generator)
                    add(.written(direction.consumer, Array(unwritten[slot][0..<piece])))
                    unwritten[slot].removeFirst(piece)
                    writtenAt[slot] += piece
                }
            }
            if Int.random(in: 0..<4, using: &generator) == 0 {
                add(.acknowledged(direction.consumer, upTo: Int64(Int.random(in: 0...writtenAt[slot], using: &generator))))
            }
            // A reset mid-stream (messages half read and half written), or the run ends in the middle of a line.
            if steps == 40, seed.isMultiple(of: 3) { add(.closed(.client, .reset)) }
            if seed.isMultiple(of: 2), streams[1].count - readAt[1] < 60 { break }
        }
        add(.closed(.client, .fin))
        add(.acknowledged(.server, upTo: Int64(writtenAt[0])))
        add(.closed(.server, .cutByFault))
        return engine.finish()
    }

    @Test("across the seeds, lines longer than the cap were cut as framing problems while in lockstep and out of it")
    func framingProblems() throws {
        let problems = try (1...40).filter { $0 % 5 == 0 }.map { try Self.run(seed: UInt64($0), shared: true).messages.framingErrors }
        #expect(problems.contains { $0 > 0 }, "\(problems)")
    }

    @Test("random traffic of 40 seeds: the whole AuditResult is equal with shared buffers and with copies", arguments: Array(UInt64(1)...40))
    func sharedEqualsCopies(seed: UInt64) throws {
        let shared = try Self.run(seed: seed, shared: true)
        let copies = try Self.run(seed: seed, shared: false)
        #expect(shared == copies, "seed \(seed): totals \(shared.totals) vs \(copies.totals); messages \(shared.messages) vs \(copies.messages)")
        #expect(
            shared.totals.sent > 0 && shared.messages.ignored > 0 && shared.messages.undecodable > 0,
            "the traffic exercises the kinds: \(shared.totals) \(shared.messages)"
        )
        if seed.isMultiple(of: 2), !seed.isMultiple(of: 5) { #expect(shared.totals.truncated > 0, "seed \(seed): a line cut by the close") }
    }
}
