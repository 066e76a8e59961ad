import Foundation
import Synchronization

#if canImport(CNIOLinux)
import CNIOLinux
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP socket on 127.0.0.1 for tests: exact control over shutdown, linger and errno,
/// with every call bounded by a receive/send timeout so a broken proxy fails a test instead of hanging it.
final class TestSocket: @unchecked Sendable {
    // Sendable: a test uses each socket from one thread at a time (a reader thread joins before the test reads results).
    let fd: Int32
    private let closed = Atomic<Bool>(false)

    init(fd: Int32) { self.fd = fd }

    /// Connects to 127.0.0.1:`port`; throws the errno on failure.
    static func connect(port: Int, timeout: Double = 10) throws -> TestSocket {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 {
            let code = errno
            Glibc.close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let socket = TestSocket(fd: fd)
        socket.setTimeout(timeout)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return socket
    }

    func setTimeout(_ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The local port.
    var localPort: Int { port(getsockname) }

    /// The peer's port (an accepted socket's: the proxy's local port of its server leg).
    var peerPort: Int { port(getpeername) }

    /// The port of the address `name` (getsockname or getpeername) gives.
    private func port(_ name: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The peer's IPv4 address (what a server logs as its client's).
    var peerAddress: String {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        return String(cString: inet_ntoa(address.sin_addr))
    }

    func sendAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            offset += n
        }
    }

    /// What one recv gave.
    enum Received: Equatable {
        case bytes([UInt8])
        case eof
        case error(Int32)
    }

    func receive(max: Int = 65536) -> Received {
        var buffer = [UInt8](repeating: 0, count: max)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, max, 0) }
        if n > 0 { return .bytes(Array(buffer[0..<n])) }
        if n == 0 { return .eof }
        return .error(errno)
    }

    /// Reads exactly `count` bytes (or fewer when the stream ends or fails).
    func receive(exactly count: Int) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            guard case .bytes(let chunk) = receive(max: min(65536, count - result.count)) else { break }
            result += chunk
        }
        return result
    }

    /// Reads until EOF or error; returns the bytes and how it ended.
    func receiveUntilEnd() -> ([UInt8], Received) {
        var result: [UInt8] = []
        while true {
            let received = receive()
            guard case .bytes(let chunk) = received else { return (result, received) }
            result += chunk
        }
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// The socket's TCP state (`tcpi_state`: 1 ESTABLISHED, 7 CLOSE after a reset, 8 CLOSE_WAIT after the peer's FIN).
    var tcpState: Int {
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return -1 }
        return Int(info.tcpi_state)
    }

    /// `tcpi_state` of a connection that is over (a reset, or both FINs done).
    static let tcpClose = 7

    /// Ends both directions without releasing the descriptor, so that a thread still using it
    /// fails instead of writing into a descriptor number that was reused.
    func shutdownBoth() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Delays this socket's ACKs (up to 40 ms, for a reply to ride on), as a consumer that reads and does not answer
    /// at once: `TCP_QUICKACK` 0 (the kernel may leave the mode again after the next delayed ACK).
    func delayAcknowledgements() {
        var zero: Int32 = 0
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &zero, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Closes with RST instead of FIN.
    func reset() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        var value = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(fd)
    }

    /// Closes once: a second close (or one after `reset`) would close whatever socket reused the number, in
    /// this test or one running beside it.
    func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        Glibc.close(fd)
    }
}

/// A listening socket on 127.0.0.1 with a free port.
final class TestListener: @unchecked Sendable {
    // Sendable: accept() is called from one thread at a time.
    let fd: Int32
    let port: Int
    private let closed = Atomic<Bool>(false)

    /// A listener whose accept queue holds about `backlog` connections.
    init(backlog: Int32 = 128) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EMFILE) }
        self.fd = fd
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            // The socket is this initializer's alone until it returns: closed here, or nothing ever closes it.
            let code = POSIXErrorCode(rawValue: errno) ?? .EADDRINUSE
            Glibc.close(fd)
            throw POSIXError(code)
        }
        port = TestSocket(fd: fd).localPort
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Waits (at most 10 s) for the next connection.
    func accept() throws -> TestSocket {
        let client = Glibc.accept(fd, nil, nil)
        guard client >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let socket = TestSocket(fd: client)
        socket.setTimeout(10)
        return socket
    }

    /// Closes once (see ``TestSocket/close()``).
    func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        Glibc.close(fd)
    }
}

/// Runs `body` on a new thread; `join()` waits for its result.
final class Background<T: Sendable>: @unchecked Sendable {
    // Sendable: `result` is written once by the thread before the semaphore is signalled, read after.
    private var result: T?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> T) {
        Thread.detachNewThread { [self] in
            result = body()
            done.signal()
        }
    }

    func join(timeout: Double = 60) -> T? {
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        return result
    }
}

/// Runs blocking socket work on its own thread and awaits it, so that a test never blocks one of
/// the few threads of Swift's cooperative pool (other suites, and the proxy's own tasks, need them). The work runs in
/// the calling task (on a thread of its own), so an expectation that fails in it is the test's: run on a bare thread,
/// it was recorded against no test («unknown»), which passed (s70q3).
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(OwnThreadExecutor()) { try body() }
}

/// Runs each job it is given on a new thread of its own (``offPool(_:)``'s executor).
private final class OwnThreadExecutor: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread.detachNewThread { job.runSynchronously(on: executor) }
    }
}

/// Waits, on a plain thread (never a pool thread), for async work: lets blocking test code call the proxy's async API.
@discardableResult
func blockingAwait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// Holds one result across threads. Sendable: written once before a semaphore is signalled, read after.
final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// `up` sent by the client and `down` by the server at once, each side reading what the other
/// sends, all on threads of their own.
final class TwoWayTransfer: Sendable {
    private let serverSide: Background<[UInt8]>
    private let clientSide: Background<[UInt8]>
    private let clientWriter: Background<Bool>

    /// With a `gate`, neither side reads until it is signalled twice (once per reader): the writers fill what the
    /// sockets and the proxy hold and then wait, so the transfer cannot end before the test lets it.
    init(client: TestSocket, server: TestSocket, up: [UInt8], down: [UInt8], gate: DispatchSemaphore? = nil) {
        serverSide = Background {
            let writer = Background { (try? server.sendAll(down)) != nil }
            gate?.wait()
            let got = server.receive(exactly: up.count)
            return writer.join() == true ? got : []
        }
        clientWriter = Background { (try? client.sendAll(up)) != nil }
        clientSide = Background {
            gate?.wait()
            return client.receive(exactly: down.count)
        }
    }

    /// What the server and the client received (empty when a side could not send all of its bytes).
    func join() -> (server: [UInt8], client: [UInt8]) {
        let wrote = clientWriter.join() == true
        return (wrote ? serverSide.join() ?? [] : [], clientSide.join() ?? [])
    }
}
