import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Finds the epoll instance behind a NIO event loop, so that a task running on that loop can ask
/// "has I/O arrived?" without blocking and without taking NIO's events (a `poll` of an epoll
/// descriptor only looks at its ready list).
///
/// NIO does not expose the descriptor, so it is recognised from the outside: a pipe's read end is
/// registered on the loop, and the one epoll descriptor of this process whose `/proc/self/fdinfo`
/// lists that pipe as a target is the loop's. Linux only; anywhere else, and whenever the search
/// fails, the result is nil and callers go without busy polling.
enum EventLoopSelector {
    /// A duplicate of `loop`'s epoll descriptor (the caller owns and closes it), or nil.
    static func duplicateDescriptor(of loop: any EventLoop) async -> CInt? {
        #if os(Linux)
        var ends: [CInt] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        defer { close(ends[1]) }
        let marker: any Channel
        do {
            marker = try await NIOPipeBootstrap(group: loop).takingOwnershipOfDescriptor(input: ends[0]).get()
        } catch {
            close(ends[0])
            return nil
        }
        defer { marker.close(promise: nil) }
        var status = stat()
        guard fstat(ends[0], &status) == 0,
            let selector = epollDescriptor(watching: ends[0], inode: UInt64(status.st_ino))
        else { return nil }
        let duplicate = dup(selector)
        return duplicate >= 0 ? duplicate : nil
        #else
        return nil
        #endif
    }

    /// The epoll descriptor of this process that has `target` (whose file has `inode`) registered.
    /// The inode matters: an epoll instance can list a descriptor number that was closed and reused.
    static func epollDescriptor(watching target: CInt, inode: UInt64) -> CInt? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = CInt(name), isEpoll(fd), watches(fd, target: target, inode: inode) else { continue }
            return fd
        }
        return nil
    }

    private static func isEpoll(_ fd: CInt) -> Bool {
        var link = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/self/fd/\(fd)", &link, link.count - 1)
        guard count > 0 else { return false }
        return String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) == "anon_inode:[eventpoll]"
    }

    /// Whether `/proc/self/fdinfo/<epoll>` has a `tfd: <target> … ino:<inode in hex>` line.
    private static func watches(_ epoll: CInt, target: CInt, inode: UInt64) -> Bool {
        guard let file = fopen("/proc/self/fdinfo/\(epoll)", "r") else { return false }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, CInt(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
            guard fields.count >= 2, fields[0] == "tfd:", CInt(fields[1]) == target else { continue }
            if fields.contains(where: { $0.hasPrefix("ino:") && UInt64($0.dropFirst(4), radix: 16) == inode }) { return true }
        }
        return false
    }
}
