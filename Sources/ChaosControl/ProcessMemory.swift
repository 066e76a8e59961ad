import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The chaos process's own memory, for `process_resident_memory_bytes` on `GET /metrics` (an agent's footprint on a
/// dashboard).
enum ProcessMemory {
    /// Resident set size in bytes, from `/proc/self/statm` (its second field, in pages); nil where there is no
    /// /proc (macOS).
    static func residentBytes() -> Int64? {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int64(fields[1]) else { return nil }
        return pages * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }
}
