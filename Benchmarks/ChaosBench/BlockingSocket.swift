#if canImport(Glibc)
import Glibc
#endif

/// A plain blocking IPv4 TCP client socket: the clients measure the proxies, not an event loop.
struct BlockingSocket {
    /// The file descriptor.
    let fd: Int32

    /// Linux's `IP_BIND_ADDRESS_NO_PORT`: bind the source address only, pick the port at connect
    /// time over the whole 4-tuple (so many clients share the ephemeral range).
    private static let bindAddressNoPort: Int32 = 24

    /// Connects to `host:port`, from `source` when given (any 127/8 address on loopback).
    static func connect(host: String, port: UInt16, source: String? = nil) throws -> BlockingSocket {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): \(errnoText())") }
        let socket = BlockingSocket(fd: fd)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let source {
            setsockopt(fd, Int32(IPPROTO_IP), bindAddressNoPort, &one, socklen_t(MemoryLayout<Int32>.size))
            var local = try address(source, port: 0)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                socket.close()
                throw BenchError("bind(\(source)): \(errnoText())")
            }
        }
        var remote = try address(host, port: port)
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &remote) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            let text = errnoText()
            socket.close()
            throw BenchError("connect(\(host):\(port)): \(text)")
        }
        return socket
    }

    private static func address(_ host: String, port: UInt16) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw BenchError("'\(host)' is not an IPv4 address") }
        return address
    }

    /// Writes every byte of `bytes`.
    func writeAll(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw BenchError("write: \(Self.errnoText())")
            }
            offset += written
        }
    }

    /// Reads exactly `buffer.count` bytes; throws on EOF first.
    func readExactly(into buffer: UnsafeMutableRawBufferPointer) throws {
        var offset = 0
        while offset < buffer.count {
            let count = try readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]))
            guard count > 0 else { throw BenchError("connection closed after \(offset) of \(buffer.count) bytes") }
            offset += count
        }
    }

    /// Reads what is there (at least one byte, or 0 at EOF).
    func readSome(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress!, buffer.count)
            if count >= 0 { return count }
            if errno == EINTR { continue }
            throw BenchError("read: \(Self.errnoText())")
        }
    }

    /// Sends FIN (no more writes); reads stay open.
    func shutdownOutput() { _ = shutdown(fd, Int32(SHUT_WR)) }

    /// Closes the descriptor.
    func close() { _ = Glibc.close(fd) }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
