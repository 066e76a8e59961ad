import Foundation

/// `idle --port P --count N --pid PID`: opens N connections, checks each echoes one message, then
/// prints how much the memory of process PID (with its children) grew per connection.
enum IdleConnections {
    static func run(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let count = try arguments.integer("count", default: 10_000)
        let pid = Int32(try arguments.integer("pid"))
        let settle = try arguments.integer("settle-ms", default: 500)
        let host = arguments.string("host", default: "127.0.0.1")
        guard count > 0 else { throw BenchError("--count must be positive") }
        // Warm up (threads, pools), then measure the baseline.
        for socket in try open(32, host: host, port: port) { socket.close() }
        usleep(UInt32(settle) * 1000)
        let before = try ProcessMemory.kilobytes(ofTreeAt: pid)
        let rssBefore = ProcessMemory.residentKilobytes(of: pid) ?? 0
        let start = MonotonicClock.nanoseconds()
        let sockets = try open(count, host: host, port: port)
        let openSeconds = MonotonicClock.seconds(since: start)
        usleep(UInt32(settle) * 1000)
        let after = try ProcessMemory.kilobytes(ofTreeAt: pid)
        let rssAfter = ProcessMemory.residentKilobytes(of: pid) ?? 0
        let processes = ProcessMemory.tree(rootedAt: pid).count
        for socket in sockets { socket.close() }
        let perConnection = Double(after - before) / Double(count)
        let rssPerConnection = Double(rssAfter - rssBefore) / Double(count)
        print(
            "kb_per_conn=\(PingPong.format(perConnection)) pss_before_kb=\(before) pss_after_kb=\(after) "
                + "rss_kb_per_conn=\(PingPong.format(rssPerConnection)) processes=\(processes) count=\(count) "
                + "open_s=\(PingPong.format(openSeconds))"
        )
    }

    /// Opens `count` connections, each verified by one echoed 8-byte message.
    private static func open(_ count: Int, host: String, port: UInt16) throws -> [BlockingSocket] {
        var sockets: [BlockingSocket] = []
        sockets.reserveCapacity(count)
        do {
            for index in 0..<count {
                let socket = try BlockingSocket.connect(host: host, port: port, source: "127.0.0.\(index % 250 + 2)")
                sockets.append(socket)
                var message = UInt64(index).littleEndian
                var reply: UInt64 = 0
                try withUnsafeBytes(of: &message) { bytes throws in try socket.writeAll(bytes) }
                try withUnsafeMutableBytes(of: &reply) { bytes throws in try socket.readExactly(into: bytes) }
                guard reply == message else { throw BenchError("connection \(index): the echo differs from what was sent") }
            }
        } catch {
            for socket in sockets { socket.close() }
            throw BenchError("after \(sockets.count) connections: \(BenchError.describe(error))")
        }
        return sockets
    }
}
