#if canImport(Glibc)
import Glibc
#endif

/// Returns heap pages that malloc keeps after large temporary allocations to the system
/// (glibc's `malloc_trim`, looked up at run time: its header is not in the Glibc module).
enum ReleaseFreedMemory {
    private typealias Trim = @convention(c) (Int) -> Int32

    private static let trim: Trim? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
        #else
        return nil
        #endif
    }()

    static func now() {
        _ = trim?(0)
    }
}
