import Foundation

/// The memory of a process and all its descendants, from /proc: the sum of their proportional
/// set sizes (a page shared by n processes counts 1/n to each), which for one process is its
/// resident memory less its share of libraries, and for a forking server like socat counts
/// every child once.
enum ProcessMemory {
    /// Kilobytes of PSS summed over `pid` and its descendants.
    static func kilobytes(ofTreeAt pid: Int32) throws -> Int {
        var total = 0
        for member in tree(rootedAt: pid) {
            guard let rollup = try? String(contentsOfFile: "/proc/\(member)/smaps_rollup", encoding: .utf8) else { continue }
            total += field("Pss:", in: rollup) ?? 0
        }
        guard total > 0 else { throw BenchError("cannot read the memory of process \(pid)") }
        return total
    }

    /// Kilobytes of VmRSS of `pid` alone.
    static func residentKilobytes(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        return field("VmRSS:", in: status)
    }

    /// `pid` and every process below it.
    static func tree(rootedAt pid: Int32) -> [Int32] {
        var children: [Int32: [Int32]] = [:]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let member = Int32(entry), let parent = parentID(of: member) else { continue }
            children[parent, default: []].append(member)
        }
        var result: [Int32] = []
        var pending = [pid]
        while let next = pending.popLast() {
            result.append(next)
            pending.append(contentsOf: children[next] ?? [])
        }
        return result
    }

    private static func parentID(of pid: Int32) -> Int32? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    private static func field(_ name: String, in text: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            return line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
        }
        return nil
    }
}
