import Foundation

#if canImport(CNIOLinux)
import CNIOLinux
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A blocking UDP socket bound to 127.0.0.1 (any port) for tests, every receive bounded by a timeout.
final class UDPTestSocket: @unchecked Sendable {
    // Sendable: a test uses each socket from one thread at a time.
    let fd: Int32

    /// A socket bound to 127.0.0.1:`port` (0: any free port); with `reuseAddress`, SO_REUSEADDR first (which lets it
    /// share a port with another socket that has it).
    init(port: Int = 0, timeout: Double = 2, reuseAddress: Bool = false) throws {
        // The socket is ours to close until `fd` holds it: from then on deinit closes it, even when init throws (closing
        // it here as well closed a number another test's socket had taken by then: s81t1's EBADF).
        let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        if reuseAddress {
            var one: Int32 = 1
            setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = Self.loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            Glibc.close(socket)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        fd = socket
        setTimeout(timeout)
    }

    deinit { Glibc.close(fd) }

    private static func loopback(port: Int, host: String = "127.0.0.1") -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }

    func setTimeout(_ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The bound port.
    var port: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Sends one datagram to `host`:`port` (an IPv4 address on this machine; 127.0.0.1 by default).
    /// Returns 0 when the kernel took it, else the error (`errno`) it was refused with.
    @discardableResult
    func send(_ bytes: [UInt8], to port: Int, host: String = "127.0.0.1") -> Int32 {
        var address = Self.loopback(port: port, host: host)
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        return sent < 0 ? errno : 0
    }

    /// Sends `text` as one datagram to `host`:`port`; returns 0 when the kernel took it, else the error it was refused
    /// with.
    @discardableResult
    func send(_ text: String, to port: Int, host: String = "127.0.0.1") -> Int32 { send(Array(text.utf8), to: port, host: host) }

    /// The next datagram and the address it came from; nil when none came within the timeout.
    private func receiveWithAddress() -> (bytes: [UInt8], from: sockaddr_in)? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = buffer.withUnsafeMutableBytes { raw in
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length) }
            }
        }
        guard count >= 0 else { return nil }
        return (Array(buffer[0..<count]), address)
    }

    /// The next datagram and the port it came from; nil when none came within the timeout.
    func receive() -> (bytes: [UInt8], fromPort: Int)? {
        receiveWithAddress().map { ($0.bytes, Int(UInt16(bigEndian: $0.from.sin_port))) }
    }

    /// The next datagram as text, with the IPv4 address and port it came from; nil when none came within the timeout.
    func receiveTextWithAddress() -> (text: String, host: String, port: Int)? {
        receiveWithAddress().map {
            (String(decoding: $0.bytes, as: UTF8.self), String(cString: inet_ntoa($0.from.sin_addr)), Int(UInt16(bigEndian: $0.from.sin_port)))
        }
    }

    /// The next datagram as text, with the port it came from.
    func receiveText() -> (text: String, fromPort: Int)? {
        receive().map { (String(decoding: $0.bytes, as: UTF8.self), $0.fromPort) }
    }

    /// Every datagram that comes until none has come for `quiet` seconds (at most `limit`).
    func drain(quiet: Double = 0.5, limit: Int = 100_000) -> [(bytes: [UInt8], fromPort: Int)] {
        setTimeout(quiet)
        var received: [(bytes: [UInt8], fromPort: Int)] = []
        while received.count < limit, let next = receive() { received.append(next) }
        return received
    }

    /// Runs `body` while another thread reads every datagram that comes (so that no burst overflows this socket's
    /// receive buffer), until none has come for `quiet` seconds after it; returns them in arrival order.
    func collecting(quiet: Double = 0.5, _ body: () throws -> Void) rethrows -> [(bytes: [UInt8], fromPort: Int)] {
        let reader = Reader()
        setTimeout(quiet)
        Thread.detachNewThread { [self] in
            while true {
                if let next = receive() {
                    reader.lock.withLock { reader.received.append(next) }
                } else if reader.lock.withLock({ reader.done }) {
                    break
                }
            }
            reader.finished.signal()
        }
        func finish() {
            reader.lock.withLock { reader.done = true }
            reader.finished.wait()
        }
        do { try body() } catch {
            finish()
            throw error
        }
        finish()
        return reader.lock.withLock { reader.received }
    }

    /// What a reader thread of ``collecting(quiet:_:)`` shares with the test.
    private final class Reader: @unchecked Sendable {
        let lock = NSLock()
        var received: [(bytes: [UInt8], fromPort: Int)] = []
        var done = false
        let finished = DispatchSemaphore(value: 0)
    }
}
