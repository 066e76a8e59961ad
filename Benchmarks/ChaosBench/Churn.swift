import Foundation
import Synchronization

/// `churn --port P --workers 50 --seconds S`: each worker opens a connection, writes 64 bytes,
/// reads their echo and closes, as fast as it can; prints completed connections per second.
///
/// Worker `k` binds source address 127.0.0.(k mod 250 + 2) with the port picked at connect time,
/// so the client's own TIME_WAIT sockets never run the ephemeral port range dry.
enum Churn {
    static func run(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let workers = try arguments.integer("workers", default: 50)
        let seconds = try arguments.integer("seconds", default: 5)
        let host = arguments.string("host", default: "127.0.0.1")
        guard workers > 0, seconds > 0 else { throw BenchError("--workers and --seconds must be positive") }
        let totals = Mutex((completed: 0, failed: 0, slow: 0, firstError: String?.none))
        let deadline = MonotonicClock.nanoseconds() + UInt64(seconds) * 1_000_000_000
        let start = MonotonicClock.nanoseconds()
        let done = DispatchGroup()
        for worker in 0..<workers {
            done.enter()
            let thread = Thread {
                let result = churn(host: host, port: port, source: "127.0.0.\(worker % 250 + 2)", until: deadline)
                totals.withLock {
                    $0.completed += result.completed
                    $0.failed += result.failed
                    $0.slow += result.slow
                    if $0.firstError == nil { $0.firstError = result.firstError }
                }
                done.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        done.wait()
        let elapsed = MonotonicClock.seconds(since: start)
        let (completed, failed, slow, firstError) = totals.withLock { ($0.completed, $0.failed, $0.slow, $0.firstError) }
        print(
            "conns_per_s=\(Int((Double(completed) / elapsed).rounded())) completed=\(completed) failed=\(failed) "
                + "slow_over_500ms=\(slow)" + (firstError.map { " first_error=\"\($0)\"" } ?? "")
        )
    }

    private static func churn(
        host: String,
        port: UInt16,
        source: String,
        until deadline: UInt64
    )
        -> (completed: Int, failed: Int, slow: Int, firstError: String?)
    {
        var completed = 0
        var failed = 0
        var slow = 0
        var firstError: String?
        var message = [UInt8](repeating: 0x5a, count: PingPong.messageSize)
        var reply = [UInt8](repeating: 0, count: PingPong.messageSize)
        while MonotonicClock.nanoseconds() < deadline {
            let began = MonotonicClock.nanoseconds()
            do {
                let socket = try BlockingSocket.connect(host: host, port: port, source: source)
                defer { socket.close() }
                message[0] = UInt8(truncatingIfNeeded: completed)
                try message.withUnsafeBytes { bytes throws in try socket.writeAll(bytes) }
                try reply.withUnsafeMutableBytes { bytes throws in try socket.readExactly(into: bytes) }
                guard reply == message else { throw BenchError("the echo differs from what was sent") }
                completed += 1
            } catch {
                failed += 1
                if firstError == nil { firstError = BenchError.describe(error) }
            }
            if MonotonicClock.nanoseconds() &- began > 500_000_000 { slow += 1 }
        }
        return (completed, failed, slow, firstError)
    }
}
