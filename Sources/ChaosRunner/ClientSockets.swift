import Foundation

/// Which of a pair's client processes hold a TCP connection to a proxy, read from the kernel: the socket table
/// (`/proc/net/tcp`, `/proc/net/tcp6`) and each process's descriptors. `ready: connected` waits for every client so,
/// not for as many connections as clients (a long-polling client opens two, and one client can satisfy a count while
/// another is still starting). Linux's `/proc` only: elsewhere ``establishedInodes(remotePorts:)`` is nil.
enum ClientSockets {
    /// The inodes of ESTABLISHED TCP sockets whose remote port is one of `ports` (nil: no socket table to read).
    static func establishedInodes(remotePorts ports: Set<Int>) -> Set<UInt64>? {
        var found: Set<UInt64> = []
        var readAny = false
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readAll(table) else { continue }
            readAny = true
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
                let fields = line.split(separator: " ")
                guard fields.count > 9, fields[3] == "01",
                    let port = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }), ports.contains(port),
                    let inode = UInt64(fields[9])
                else { continue }
                found.insert(inode)
            }
        }
        return readAny ? found : nil
    }

    /// `pid` and every process below it (a shell's command, a launcher's workers).
    static func tree(of pid: Int32) -> [Int32] { trees(of: [pid])[pid] ?? [pid] }

    /// Each of `pids` with every process below it, from one reading of `/proc`.
    static func trees(of pids: [Int32]) -> [Int32: [Int32]] {
        var children: [Int32: [Int32]] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(entry), let stat = readAll("/proc/\(entry)/stat"),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command name in parentheses: the state, then the parent's pid.
            let rest = stat[stat.index(after: close)...].split(separator: " ")
            if rest.count > 1, let parent = Int32(rest[1]) { children[parent, default: []].append(child) }
        }
        var trees: [Int32: [Int32]] = [:]
        for pid in pids {
            var found = [pid]
            var index = 0
            while index < found.count {
                found += children[found[index]] ?? []
                index += 1
            }
            trees[pid] = found
        }
        return trees
    }

    /// The whole of a `/proc` file, read to its end (its size says 0: a reader that trusts it gets a page or nothing).
    static func readAll(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// Whether one of `pids` has a descriptor on a socket of `inodes`.
    static func holdsOne(of inodes: Set<UInt64>, _ pids: [Int32]) -> Bool {
        for pid in pids {
            for descriptor in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)"),
                    target.hasPrefix("socket:["), let inode = UInt64(target.dropFirst("socket:[".count).dropLast())
                else { continue }
                if inodes.contains(inode) { return true }
            }
        }
        return false
    }
}
