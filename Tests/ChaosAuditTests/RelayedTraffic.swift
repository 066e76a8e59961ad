import ChaosCore
import Testing

@testable import ChaosAudit

/// Feeds the audit scripted traffic as a relay would, for the lockstep tests (a read the relay writes whole from its
/// own buffer, decoded once, must audit exactly as the same traffic whose every write is a copy): each connection's
/// byte streams (upstream, downstream) cut into random reads, each read written whole (shared buffer or copy), in
/// pieces, or not yet (and what is left written at the end), with acknowledgements, the last connection reset mid-stream every third seed and, every fourth,
/// the first connection's upstream left half read at the end. A connection's gate holds its upstream at a handshake's
/// end until its downstream has been read as far as the answer's end.
enum RelayedTraffic {
    /// The audit of `streams` (per connection: its upstream and downstream bytes) under `spec`, reads and writes
    /// drawn from `generator` (what happens to which seed by `seed`); with `shared`, a read written whole is written as
    /// the read's own buffer.
    static func audit(
        _ streams: [[[UInt8]]],
        spec: ProtocolSpec,
        seed: UInt64,
        shared: Bool,
        generator: inout SeededGenerator,
        gates: [(upstream: Int, downstream: Int)] = []
    ) throws -> AuditResult {
        let engine = try AuditEngine(spec: spec)
        var time: Int64 = 0
        func add(_ connection: ConnectionID, _ kind: TrafficEvent.Kind) {
            time += 1_000
            engine.ingest(TrafficEvent(time: time, connection: connection, kind: kind))
        }
        let pairs = streams.indices
        for pair in pairs {
            let endpoints = ConnectionEndpoints(proxy: "p", client: "c\(pair + 1)", listen: "l", proxyLocal: "pl", server: "s")
            add(ConnectionID(pair + 1), .opened(endpoints))
        }
        var readAt = pairs.map { _ in [0, 0] }
        var writtenAt = pairs.map { _ in [0, 0] }
        var unwritten: [[[UInt8]]] = pairs.map { _ in [[], []] }
        var steps = 0
        var reset = false
        let last = pairs.count - 1
        func left(_ pair: Int, _ slot: Int) -> Int { streams[pair][slot].count - readAt[pair][slot] }
        func open(_ pair: Int) -> Bool { !(reset && pair == last) }
        while pairs.contains(where: { pair in open(pair) && (0...1).contains { left(pair, $0) > 0 } }), steps < 20_000 {
            steps += 1
            let pair = Int.random(in: pairs, using: &generator)
            let slot = Int.random(in: 0...1, using: &generator)
            let connection = ConnectionID(pair + 1)
            let direction: Direction = slot == 0 ? .upstream : .downstream
            guard left(pair, slot) > 0, open(pair) else { continue }
            var size = min(Int.random(in: 1...600, using: &generator), left(pair, slot))
            // A client sends past its handshake only once it has the answer (a WebSocket's 101).
            if slot == 0, pair < gates.count, readAt[pair][1] < gates[pair].downstream {
                size = min(size, gates[pair].upstream - readAt[pair][0])
                guard size > 0 else { continue }
            }
            let read = Array(streams[pair][slot][readAt[pair][slot]..<(readAt[pair][slot] + size)])
            readAt[pair][slot] += size
            add(connection, .read(direction.producer, read))
            let how = seed % 4 == 1 ? 0 : Int.random(in: 0..<10, using: &generator)
            if how < 6, unwritten[pair][slot].isEmpty {
                add(connection, .written(direction.consumer, shared ? read : read.withUnsafeBufferPointer { Array($0) }))
                writtenAt[pair][slot] += size
            } else {
                unwritten[pair][slot] += read
                if how < 9 {
                    let piece = Int.random(in: 0...unwritten[pair][slot].count, using: &generator)
                    add(connection, .written(direction.consumer, Array(unwritten[pair][slot][0..<piece])))
                    unwritten[pair][slot].removeFirst(piece)
                    writtenAt[pair][slot] += piece
                }
            }
            if Int.random(in: 0..<4, using: &generator) == 0 {
                add(connection, .acknowledged(direction.consumer, upTo: Int64(Int.random(in: 0...writtenAt[pair][slot], using: &generator))))
            }
            // The last connection reset mid-stream, messages half read and half written.
            if steps == 60, seed.isMultiple(of: 3) {
                add(ConnectionID(last + 1), .closed(.client, .reset))
                reset = true
            }
            if seed.isMultiple(of: 4), left(0, 0) < 40 { break }
        }
        for pair in pairs {
            let connection = ConnectionID(pair + 1)
            // What the relay still held, written at the end (a reset connection's is gone).
            for slot in 0...1 where open(pair) && !unwritten[pair][slot].isEmpty {
                let direction: Direction = slot == 0 ? .upstream : .downstream
                add(connection, .written(direction.consumer, unwritten[pair][slot]))
                writtenAt[pair][slot] += unwritten[pair][slot].count
            }
            add(connection, .acknowledged(.server, upTo: Int64(writtenAt[pair][0])))
            add(connection, .acknowledged(.client, upTo: Int64(writtenAt[pair][1])))
            add(connection, .closed(.client, .fin))
            add(connection, .closed(.server, .fin))
        }
        return engine.finish()
    }

    /// Audits `streams` with shared buffers and with copies (the same reads and writes, drawn from `generator` as it
    /// is), expects the two results equal and free of protocol problems, and returns the shared one.
    static func sharedEqualsCopies(
        _ streams: [[[UInt8]]],
        gates: [(upstream: Int, downstream: Int)],
        spec: ProtocolSpec,
        seed: UInt64,
        generator: SeededGenerator
    ) throws -> AuditResult {
        var sharedGenerator = generator
        var copiesGenerator = generator
        let shared = try audit(streams, spec: spec, seed: seed, shared: true, generator: &sharedGenerator, gates: gates)
        let copies = try audit(streams, spec: spec, seed: seed, shared: false, generator: &copiesGenerator, gates: gates)
        #expect(shared == copies, "seed \(seed): totals \(shared.totals) vs \(copies.totals); messages \(shared.messages) vs \(copies.messages)")
        let problems = shared.anomalies.filter { $0.kind == .protocolError }
        #expect(problems.isEmpty, "no protocol problem: \(problems.prefix(3).map(\.detail))")
        return shared
    }
}
