import CChaosEpoll
import Glibc

/// A pipe that a direction's bytes go through from one socket to the other without entering user space
/// (`splice(2)`, as haproxy does): what the source's socket holds is moved into the pipe, then from the pipe into the
/// target's socket. It holds at most one fill at a time, as the read/write relay holds at most one read per
/// direction: while ``held`` bytes wait for the target, the source is not read.
struct SplicePipe {
    /// The most one fill moves, and the pipe's size where the system allows it (a larger pipe moves more per wake-up
    /// than the 64 KiB the read/write relay reads).
    static let capacity = 256 * 1024

    private let readEnd: Int32
    private let writeEnd: Int32
    /// The pipe's size in bytes (what one fill may move).
    let size: Int
    /// Bytes in the pipe, waiting for the target's socket to take them.
    private(set) var held = 0

    private init(readEnd: Int32, writeEnd: Int32, size: Int) {
        self.readEnd = readEnd
        self.writeEnd = writeEnd
        self.size = size
    }

    /// A new non-blocking pipe; nil when the system refuses one (no descriptors left): the relay then reads and writes.
    static func make() -> SplicePipe? {
        var fds: [Int32] = [-1, -1]
        let size = chaos_splice_pipe(&fds, Int32(capacity))
        guard size > 0 else { return nil }
        return SplicePipe(readEnd: fds[0], writeEnd: fds[1], size: Int(size))
    }

    /// Moves what socket `fd` holds (up to ``size`` bytes) into the empty pipe: the bytes moved, 0 at the end of the
    /// socket's input (a FIN), or -errno (`EAGAIN`: nothing to move; `EINVAL`: this socket cannot be spliced).
    mutating func fill(from fd: Int32) -> Int {
        let moved = chaos_splice(fd, writeEnd, UInt(size))
        if moved > 0 { held += moved }
        return moved
    }

    /// Moves what the pipe holds into socket `fd`: the bytes moved, or -errno (`EAGAIN`: the socket takes no more now).
    mutating func drain(to fd: Int32) -> Int {
        let moved = chaos_splice(readEnd, fd, UInt(held))
        if moved > 0 { held -= moved }
        return moved
    }

    /// Reads what the pipe holds into an array (handed over with the sockets when the connection leaves the relay).
    mutating func take() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: held)
        var taken = 0
        while taken < held {
            let count = bytes.withUnsafeMutableBytes { read(readEnd, $0.baseAddress! + taken, held - taken) }
            if count > 0 {
                taken += count
            } else if count < 0, errno == EINTR {
                continue
            } else {
                break
            }
        }
        held = 0
        return Array(bytes[0..<taken])
    }

    /// Closes both ends; what the pipe held is dropped.
    func close() {
        Glibc.close(readEnd)
        Glibc.close(writeEnd)
    }
}

/// When the epoll relay splices a direction's bytes (only where nothing records them: no audit, no capture).
package enum SplicePolicy: Sendable {
    /// Never: it reads and writes.
    case off
    /// Once a read fills the whole read buffer (bulk traffic); small exchanges are read and written, a splice
    /// taking one more system call per wake-up to find the socket empty. The default.
    case bulk
    /// From the first byte (the relay's tests, to hold the splice path to every rule of the relay).
    case always

    /// The policy `CHAOS_SPLICE` asks for (`0`: off, `always`), else `bulk`.
    package static var fromEnvironment: SplicePolicy {
        switch getenv("CHAOS_SPLICE").map({ String(cString: $0) }) {
        case "0"?, "off"?: .off
        case "always"?: .always
        default: .bulk
        }
    }
}
