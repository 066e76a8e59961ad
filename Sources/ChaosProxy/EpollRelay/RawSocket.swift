import CChaosEpoll
import CoreFoundation
import Foundation
import Glibc
import NIOCore

/// Thin, allocation-free wrappers over the socket calls the epoll relay makes.
enum RawSocket {
    /// Turns Nagle off, as the NIO relay does.
    static func setNoDelay(_ fd: Int32) {
        var on: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Closes with RST rather than FIN (SO_LINGER 0).
    static func closeWithReset(_ fd: Int32) {
        var abort = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        _ = close(fd)
    }

    /// What the kernel knows `fd`'s open socket by (its inode), or nil when `fd` is not open.
    static func identity(_ fd: Int32) -> UInt64? {
        var status = Glibc.stat()
        guard fstat(fd, &status) == 0 else { return nil }
        return UInt64(status.st_ino)
    }

    /// Resets `fd` when it is still the socket `identity` names: after a hand-over to NIO failed,
    /// NIO may or may not have closed it, and the number may already name someone else's file.
    static func closeWithReset(_ fd: Int32, ifStill identity: UInt64?) {
        guard let identity, Self.identity(fd) == identity else { return }
        closeWithReset(fd)
    }

    /// Closes `fd` when it is still the socket `identity` names, as ``closeWithReset(_:ifStill:)`` does, for a socket
    /// with no connection to reset (a UDP socket).
    static func closeWithoutReset(_ fd: Int32, ifStill identity: UInt64?) {
        guard let identity, Self.identity(fd) == identity else { return }
        Glibc.close(fd)
    }

    /// The lowest descriptor number that means "too close to the open-file limit": the kernel
    /// hands out the lowest free number, so a new descriptor numbered `n` means `n` others are
    /// open. The last quarter of the limit (at most 64) stays free for the rest of the process:
    /// Dispatch, for one, crashes the process when it cannot open a file.
    static let descriptorCeiling: Int32 = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < UInt(Int32.max) else { return .max }
        let soft = Int64(clamping: limit.rlim_cur)
        return Int32(clamping: soft - min(64, soft / 4))
    }()

    /// The pending error of `fd` (0 when none): how a non-blocking connect ended.
    static func pendingError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 else { return errno }
        return error
    }

    /// `host:port` of the socket's local (`peer` false) or remote end, "?" when unknown.
    static func name(_ fd: Int32, peer: Bool) -> String {
        address(fd, peer: peer)?.hostPort ?? "?"
    }

    /// The socket's local (`peer` false) or remote address.
    static func address(_ fd: Int32, peer: Bool) -> SocketAddress? {
        var storage = sockaddr_storage()
        var size = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let found = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                (peer ? getpeername(fd, $0, &size) : getsockname(fd, $0, &size)) == 0
            }
        }
        return found ? try? SocketAddress(storage) : nil
    }

    /// A non-blocking listening socket bound to `address`, with TCP_NODELAY for the sockets it
    /// accepts to inherit. Throws the failing call's errno.
    static func listen(on address: SocketAddress, backlog: Int32) throws(RawSocketError) -> Int32 {
        let fd = chaos_tcp_socket(Int32(address.protocol.rawValue))
        guard fd >= 0 else { throw RawSocketError(call: "socket", code: -fd) }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        setNoDelay(fd)
        let bound = address.withSockAddr { bind(fd, $0, socklen_t($1)) }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw RawSocketError(call: "bind", code: code)
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw RawSocketError(call: "listen", code: code)
        }
        return fd
    }
}

/// A socket call that failed, with its errno.
struct RawSocketError: Error, CustomStringConvertible {
    let call: String
    let code: Int32
    var description: String { "\(call): \(String(cString: strerror(code)))" }
}

extension SocketAddress {
    /// Builds an address from what `getsockname`/`getpeername` filled in.
    init(_ storage: sockaddr_storage) throws {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            self = SocketAddress(address, host: "")
        case AF_INET6:
            let address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            self = SocketAddress(address, host: "")
        default:
            throw RawSocketError(call: "getsockname", code: EAFNOSUPPORT)
        }
    }
}
