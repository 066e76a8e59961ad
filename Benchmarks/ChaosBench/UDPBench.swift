#if canImport(Glibc)
import Glibc
#endif

/// `udp-echo` and `udp-flood`: the UDP proxy's benchmark pair on plain blocking sockets.
enum UDPBench {
    /// `udp-echo --port P`: sends every datagram back to where it came from, until killed.
    static func echo(_ arguments: BenchArguments) throws {
        let fd = try socket(bindingTo: try arguments.port())
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var peer = sockaddr_storage()
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length) }
                }
            }
            guard count >= 0 else {
                if errno == EINTR { continue }
                throw BenchError("recvfrom: \(String(cString: strerror(errno)))")
            }
            _ = buffer.withUnsafeBytes { raw in
                withUnsafePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, raw.baseAddress, count, 0, $0, length) }
                }
            }
        }
    }

    /// `udp-flood --port P [--seconds S] [--size 1200] [--window 32]`: datagrams of `size` bytes to an echo at
    /// 127.0.0.1:P for S seconds, at most `window` awaiting their echo (one that has not come back in 20 ms is
    /// given up as lost). Prints `datagrams/s N MB/s M lost L`: the echoed datagrams each way.
    static func flood(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let seconds = try arguments.integer("seconds", default: 3)
        let size = max(8, try arguments.integer("size", default: 1_200))
        let window = max(1, try arguments.integer("window", default: 32))
        let fd = try socket(bindingTo: 0)
        guard connect(fd, toPort: port) else { throw BenchError("connect: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 0, tv_usec: 20_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let datagram = [UInt8](repeating: 0x5A, count: size)
        var reply = [UInt8](repeating: 0, count: 65_536)
        var outstanding = 0
        var echoed = 0
        var lost = 0
        let start = MonotonicClock.nanoseconds()
        let end = start + UInt64(seconds) * 1_000_000_000
        while MonotonicClock.nanoseconds() < end {
            while outstanding < window {
                guard datagram.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == size else { break }
                outstanding += 1
            }
            let count = reply.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                echoed += 1
                outstanding = max(0, outstanding - 1)  // a late echo of one given up as lost
            } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNREFUSED {
                lost += outstanding
                outstanding = 0
            }
        }
        let elapsed = MonotonicClock.seconds(since: start)
        let rate = Double(echoed) / elapsed
        let megabytes = Double(Int(rate * Double(size) / 1e5)) / 10
        print("datagrams/s \(Int(rate)) MB/s \(megabytes) lost \(lost)")
        close(fd)
    }

    /// `udp-flows --port P --count N [--hold S]`: N sockets, each a flow of its own (one datagram, its echo awaited),
    /// held open for S seconds while the proxy's memory is read; prints how many flows were echoed.
    static func flows(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let count = try arguments.integer("count")
        let hold = try arguments.integer("hold", default: 3)
        var sockets: [Int32] = []
        var echoed = 0
        var reply = [UInt8](repeating: 0, count: 64)
        for _ in 0..<count {
            let fd = try socket(bindingTo: 0, buffers: false)
            sockets.append(fd)
            _ = connect(fd, toPort: port)
            var timeout = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            _ = send(fd, "flow", 4, 0)
            if reply.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, 0) }) > 0 { echoed += 1 }
        }
        print("flows \(echoed)")
        sleep(UInt32(hold))
        for fd in sockets { close(fd) }
    }

    /// 127.0.0.1:`port`.
    private static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Connects the datagram socket `fd` to 127.0.0.1:`port` (its datagrams go there, only its answers come back).
    private static func connect(_ fd: Int32, toPort port: UInt16) -> Bool {
        var target = loopback(port)
        return withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func socket(bindingTo port: UInt16, buffers: Bool = true) throws -> Int32 {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
        if buffers {
            var size: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw BenchError("bind(127.0.0.1:\(port)): \(String(cString: strerror(errno)))") }
        return fd
    }
}
