import Foundation

/// Blocking IPv4 loopback sockets for a small real TCP exchange (server, one-shot relay, client)
/// that `tcpdump -i lo` can capture.
enum LoopbackSockets {
    struct SocketError: Error, CustomStringConvertible {
        var description: String
    }

    /// A listening socket on 127.0.0.1 with a kernel-chosen port.
    static func listen() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(description: "socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(descriptor, 16) == 0 else {
            close(descriptor)
            throw SocketError(description: "bind/listen: \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    /// Connects to 127.0.0.1:`port`.
    static func connect(port: UInt16) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw SocketError(description: "connect: \(errno)")
        }
        return descriptor
    }

    /// Accepts one connection.
    static func accept(_ listener: Int32) throws -> Int32 {
        let descriptor = Glibc.accept(listener, nil, nil)
        guard descriptor >= 0 else { throw SocketError(description: "accept: \(errno)") }
        return descriptor
    }

    /// Writes every byte.
    static func send(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw SocketError(description: "send: \(errno)") }
            sent += count
        }
    }

    /// Reads until the peer's FIN.
    static func receiveAll(_ descriptor: Int32) throws -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count >= 0 else { throw SocketError(description: "recv: \(errno)") }
            if count == 0 { return result }
            result += buffer[0..<count]
        }
    }
}
