/// `pingpong --port P --count N`: 64-byte round trips over one connection, one at a time;
/// prints the round-trip time's p50 and p99 in microseconds.
enum PingPong {
    static let messageSize = 64

    static func run(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let count = try arguments.integer("count", default: 20_000)
        let warmup = try arguments.integer("warmup", default: 1_000)
        guard count > 0 else { throw BenchError("--count must be positive") }
        let socket = try BlockingSocket.connect(host: arguments.string("host", default: "127.0.0.1"), port: port)
        defer { socket.close() }
        var samples = [UInt64](repeating: 0, count: count)
        var message = [UInt8](repeating: 0, count: messageSize)
        var reply = [UInt8](repeating: 0, count: messageSize)
        for round in 0..<(warmup + count) {
            message[0] = UInt8(truncatingIfNeeded: round)
            let start = MonotonicClock.nanoseconds()
            try message.withUnsafeBytes { bytes throws in try socket.writeAll(bytes) }
            try reply.withUnsafeMutableBytes { bytes throws in try socket.readExactly(into: bytes) }
            let elapsed = MonotonicClock.nanoseconds() &- start
            guard reply == message else { throw BenchError("round \(round): the echo differs from what was sent") }
            if round >= warmup { samples[round - warmup] = elapsed }
        }
        samples.sort()
        let p50 = Double(percentile(samples, 0.50)) / 1000
        let p99 = Double(percentile(samples, 0.99)) / 1000
        print("p50_us=\(format(p50)) p99_us=\(format(p99)) count=\(count)")
    }

    /// The sample at fraction `fraction` of sorted `samples` (nearest rank).
    static func percentile(_ samples: [UInt64], _ fraction: Double) -> UInt64 {
        let rank = Int((fraction * Double(samples.count)).rounded(.up)) - 1
        return samples[min(max(rank, 0), samples.count - 1)]
    }

    static func format(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
